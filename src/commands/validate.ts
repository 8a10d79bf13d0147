/** `bearer-proxy validate`: load a config, print every problem (and warnings), exit 1 if any. */
import { formatConfigError, loadConfigWithWarnings } from "../config/load.js";
import { ConfigError } from "../errors.js";
import { configFileFrom, configFlagsFrom } from "./config-flags.js";

/** `bearer-proxy validate`: prints every problem of a config; resolves with the exit code. */
export async function validateCommand(
  values: Record<string, string | boolean | undefined>,
): Promise<number> {
  const configFile = configFileFrom(values);
  try {
    const { config, warnings } = await loadConfigWithWarnings({
      configFile,
      flags: configFlagsFrom(values),
    });
    for (const warning of warnings) process.stderr.write(`warning: ${warning}\n`);
    const names = config.upstreams.map((u) => u.name).join(", ");
    process.stdout.write(
      `${configFile ?? "configuration"} is valid: ${config.upstreams.length} upstream(s) (${names}), proxy on ${config.listen.host}:${config.listen.port}, admin on ${config.admin.host}:${config.admin.port}\n`,
    );
    return 0;
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${formatConfigError(err)}\n`);
      return 1;
    }
    throw err;
  }
}
