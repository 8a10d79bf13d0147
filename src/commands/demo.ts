/**
 * `bearer-proxy demo` (what `npm start` runs): the emulator plus a proxy with one upstream per
 * API version pointed at it, and the curl lines to try. Needs no account anywhere.
 */
import { loadConfig } from "../config/load.js";
import { startEmulator } from "../emulator/emulator.js";
import type { Emulator } from "../emulator/emulator-types.js";
import { startProxy } from "../main.js";
import { toListenError } from "../net/listen-error.js";
import { createLogger } from "../observability/logger.js";
import { cannotListen, demoListenHint } from "./listen-hints.js";
import { announce } from "./run.js";

type Values = Record<string, string | boolean | undefined>;

function port(values: Values, name: string, fallback: number): number {
  const raw = values[name];
  if (typeof raw !== "string") return fallback;
  if (!/^[0-9]+$/.test(raw) || Number(raw) > 65535)
    throw new Error(`--${name}: expected a port number, found "${raw}"`);
  return Number(raw);
}

/** The demo's config, as YAML so it goes through the same validation as a user's file. */
export function demoConfigYaml(opts: {
  emulatorUrl: string;
  caFile: string;
  port: number;
  adminPort: number;
  logFormat: string;
  /** Default info: the demo logs what it does. */
  logLevel?: string;
}): string {
  return `
listen: { host: 127.0.0.1, port: ${opts.port} }
admin: { host: 127.0.0.1, port: ${opts.adminPort} }
log: { level: ${opts.logLevel ?? "info"}, format: ${opts.logFormat} }
shutdown: { drainDelay: 0s, timeout: 5s }
upstreams:
  - name: sheets
    baseUrl: ${opts.emulatorUrl}
    apiVersion: default
    clientId: demo-client
    clientSecret: demo-secret
    tls: { caFile: ${JSON.stringify(opts.caFile)} }
    match: { pathPrefix: / }
  - name: scripts
    baseUrl: ${opts.emulatorUrl}
    apiVersion: scripting-preview
    tokenRequestFormat: json
    clientId: demo-client
    clientSecret: demo-secret
    tls: { caFile: ${JSON.stringify(opts.caFile)} }
    match: { pathPrefix: /scripts }
`;
}

/** `bearer-proxy demo`: runs until a signal; resolves with the exit code. */
export async function demoCommand(values: Values): Promise<number> {
  try {
    return await runDemo(values);
  } catch (error) {
    // A port taken: which of the three listeners, and the flag that moves it.
    const viaNpmStart = process.env.npm_lifecycle_event === "start";
    const line = cannotListen(error, (listener) => demoListenHint(listener, viaNpmStart));
    if (line === undefined) throw error;
    process.stderr.write(`bearer-proxy: ${line}\n`);
    return 1;
  }
}

async function runDemo(values: Values): Promise<number> {
  const proxyPort = port(values, "port", 8080);
  const adminPort = port(values, "admin-port", 9901);
  const emulatorPort = port(values, "emulator-port", 8443);
  const logFormat =
    typeof values["log-format"] === "string"
      ? values["log-format"]
      : process.stdout.isTTY
        ? "pretty"
        : "json";
  const emulator = await startEmulator({ port: emulatorPort }).catch((error: unknown) => {
    throw toListenError(error, { kind: "emulator" }, "127.0.0.1", emulatorPort);
  });
  const { config, logger, running } = await startDemoProxy(emulator, {
    port: proxyPort,
    adminPort,
    logFormat,
  }).catch(async (error: unknown) => {
    // A listening emulator would keep the process alive after the error is reported.
    await emulator.close().catch(() => {});
    throw error;
  });
  announce(config, logger, running.addresses);
  const p = running.addresses.proxy[0]?.port ?? proxyPort;
  const a = running.addresses.admin.port;
  process.stdout.write(
    [
      "",
      "bearer-proxy demo is running: the built-in upstream emulator plus a proxy pointed at it.",
      `  emulator (HTTPS, the "upstream"): ${emulator.url}   CA: ${emulator.caFile}`,
      `  proxy (plain HTTP, no credentials needed): http://127.0.0.1:${p}`,
      "",
      "Try:",
      `  curl http://127.0.0.1:${p}/platform/v1/spreadsheets/demo     # default version: Authorization injected`,
      `  curl http://127.0.0.1:${p}/scripts                           # preview: Authorization + X-Version injected`,
      `  curl http://127.0.0.1:${p}/echo/anything                     # what the upstream received`,
      `  curl http://127.0.0.1:${a}/status                            # token state (fingerprints only)`,
      `  curl http://127.0.0.1:${a}/metrics`,
      "",
      "Stop with Ctrl-C.",
      "",
    ].join("\n"),
  );
  return running.done;
}

/** The proxy in front of the demo's emulator, stopping the emulator when it stops. */
async function startDemoProxy(
  emulator: Emulator,
  opts: { port: number; adminPort: number; logFormat: string },
) {
  const config = await loadConfig({
    configText: demoConfigYaml({ emulatorUrl: emulator.url, caFile: emulator.caFile, ...opts }),
    env: {},
  });
  const logger = createLogger({ level: config.log.level, format: config.log.format });
  const running = await startProxy(config, {
    logger,
    handleSignals: true,
    onStopped: () => emulator.close(),
  });
  return { config, logger, running };
}
