/** CLI glue for the one-shot commands that need a loaded config: `token` and `check`. */
import { loadOrReport } from "./run.js";

type Values = Record<string, string | boolean | undefined>;
const str = (v: string | boolean | undefined): string | undefined =>
  typeof v === "string" ? v : undefined;

/** `bearer-proxy token`: load the config, print one fresh token; resolves with the exit code. */
export async function tokenCommand(values: Values): Promise<number> {
  const loaded = await loadOrReport(values);
  if (!loaded) return 1;
  const { runToken } = await import("./token.js");
  return runToken({
    config: loaded.config,
    upstream: str(values.upstream),
    stdout: process.stdout,
    stderr: process.stderr,
  });
}

/** `bearer-proxy check`: load the config, diagnose each upstream; resolves with the exit code. */
export async function checkCommand(values: Values): Promise<number> {
  const loaded = await loadOrReport(values);
  if (!loaded) return 1;
  const { runCheck } = await import("./check.js");
  return runCheck({
    config: loaded.config,
    upstream: str(values.upstream),
    probePath: str(values["probe-path"]),
    stdout: process.stdout,
    stderr: process.stderr,
  });
}
