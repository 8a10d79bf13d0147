/** `bearer-proxy run`: load config, start, run until a signal or /quitquitquit. */
import { displayUrl } from "../admin/redact.js";
import { codeCacheState } from "../base/v8-code-cache.js";
import { formatConfigError, loadConfigWithWarnings } from "../config/load.js";
import type { ProxyConfig } from "../config/proxy-config.js";
import { ConfigError, errorMessage, ListenError } from "../errors.js";
import { startProxy } from "../main.js";
import { createLogger, type Logger } from "../observability/logger.js";
import { reloadOnChange } from "../reload/reload-on-change.js";
import { configFileFrom, configFlagsFrom } from "./config-flags.js";
import { cannotListen, runListenHint } from "./listen-hints.js";
import { setV8Flags } from "./v8-flags.js";

type Values = Record<string, string | boolean | undefined>;

/** One clear line per upstream, so an operator sees at a glance where tokens come from. */
export function announce(
  config: ProxyConfig,
  logger: Logger,
  addresses: { proxy: { port: number }[]; admin: { port: number } },
): void {
  for (const upstream of config.upstreams) {
    // A token URL may carry a query (an API key, sometimes): shown as `?…`, as on /status.
    const tokenUrl = displayUrl(upstream.token.tokenUrl);
    logger.info(
      {
        upstream: upstream.name,
        baseUrl: upstream.baseUrl,
        apiVersion: upstream.apiVersion,
        tokenUrl,
        match: upstream.match,
        listen: upstream.listen ?? config.listen,
      },
      `upstream ${upstream.name}: ${upstream.baseUrl} (version ${upstream.apiVersion}), token endpoint ${tokenUrl}`,
    );
  }
  logger.info(
    { proxyPorts: addresses.proxy.map((a) => a.port), adminPort: addresses.admin.port },
    `proxy listening on ${config.listen.host}:${addresses.proxy[0]?.port}, admin on ${config.admin.host}:${addresses.admin.port}`,
  );
}

/** Load config and exit 1 with every problem listed when it is invalid. */
export async function loadOrReport(
  values: Values,
): Promise<{ config: ProxyConfig; warnings: string[] } | undefined> {
  try {
    return await loadConfigWithWarnings({
      configFile: configFileFrom(values),
      flags: configFlagsFrom(values),
    });
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${formatConfigError(err)}\n`);
      return undefined;
    }
    throw err;
  }
}

const ignoreSignal = () => {};

/** Whether this start compiled from the bundle's code cache (base/v8-code-cache.ts). */
function logCodeCache(logger: Logger): void {
  const codeCache = codeCacheState();
  if (codeCache === undefined) return;
  if (!codeCache.found) {
    logger.debug({ codeCache }, `code cache: none for this Node at ${codeCache.dir}`);
  } else if (codeCache.rejected > 0) {
    // Its own files, refused: made by another Node build or under other V8 flags (NODE_OPTIONS).
    logger.info(
      { codeCache },
      "code cache: V8 refused the bundle's cache (another Node or other V8 flags); compiling from source. `bearer-proxy code-cache` remakes it",
    );
  } else {
    logger.debug({ codeCache }, `code cache: ${codeCache.used} chunks from ${codeCache.dir}`);
  }
}

/** What `bearer-proxy run` calls itself (at most 15 bytes: the kernel's comm limit). */
export const PROCESS_TITLE = "bearer-proxy";

/** `bearer-proxy run`: runs until a signal or /quitquitquit; resolves with the exit code. */
export async function runCommand(values: Values): Promise<number> {
  // `pidof bearer-proxy` and `ps` name the process, not `node` (docs/operations.md, "Reload":
  // `kill -HUP "$(pidof bearer-proxy)"`). Only the server takes the name: a `wait` or `check`
  // running beside it must not receive the signal too. libuv sets the thread name (comm) and
  // rewrites argv in place, which also takes flags such as --client-secret out of /proc/PID/cmdline.
  process.title = PROCESS_TITLE;
  // SIGHUP reloads (below); until then, and during shutdown, it must not end the process
  // (Node's default for a signal nobody listens to).
  process.on("SIGHUP", ignoreSignal);
  // Before the first token request compiles undici's parser and before any request's code is
  // optimized (commands/v8-flags.ts).
  setV8Flags();
  const loaded = await loadOrReport(values);
  if (!loaded) return 1;
  const { config, warnings } = loaded;
  const logger = createLogger({ level: config.log.level, format: config.log.format });
  for (const warning of warnings) logger.warn(warning);
  logCodeCache(logger);
  try {
    const running = await startProxy(config, { logger, handleSignals: true });
    // Before the announcement: once the ports are out, a SIGHUP must already reload.
    const watcher = await reloadOnChange({
      app: running.app,
      logger,
      file: configFileFrom(values),
      load: () =>
        loadConfigWithWarnings({
          configFile: configFileFrom(values),
          flags: configFlagsFrom(values),
        }),
    });
    announce(config, logger, running.addresses);
    const code = await running.done;
    watcher.close();
    return code;
  } catch (err) {
    const line = cannotListen(err, runListenHint) ?? `cannot start: ${errorMessage(err)}`;
    const fields =
      err instanceof ListenError
        ? { code: err.code, listener: err.listener.kind, address: err.address, reason: err.reason }
        : { code: (err as { code?: string }).code };
    logger.fatal(fields, line);
    process.stderr.write(`bearer-proxy: ${line}\n`);
    return 1;
  }
}
