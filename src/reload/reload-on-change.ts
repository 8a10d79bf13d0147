/**
 * Reload the running app when the config file changes or SIGHUP arrives: load and validate the
 * configuration exactly as at start; an invalid one is logged with every problem (as `validate`
 * prints them) and the running configuration stays. A reload never ends the process.
 */
import { formatConfigError } from "../config/load.js";
import type { ProxyConfig } from "../config/proxy-config.js";
import { ConfigError, errorMessage } from "../errors.js";
import type { Logger } from "../observability/logger.js";
import { type ConfigWatcher, type ReloadTrigger, watchConfig } from "./config-watcher.js";

/** What a reload came to (counted and shown on /status). */
export type ReloadOutcome =
  | { outcome: "applied" }
  | { outcome: "rejected"; problems: string[] }
  | { outcome: "restart_required"; paths: string[] };

/** What a reload asks of the running app (the App of app/build-app.ts). */
export interface ReloadableApp {
  /** Apply a new, already validated configuration. */
  reload(next: ProxyConfig, trigger?: ReloadTrigger): Promise<ReloadOutcome>;
  /** Record a reload whose configuration did not validate (the running one stays). */
  recordRejected(problems: string[], trigger?: ReloadTrigger): ReloadOutcome;
}

export interface ReloadOnChangeOptions {
  app: ReloadableApp;
  logger: Logger;
  /** The config file to watch; without one only SIGHUP reloads (the environment, flags). */
  file: string | undefined;
  /** Load and validate the configuration as at start (throws ConfigError when invalid). */
  load(): Promise<{ config: ProxyConfig; warnings: string[] }>;
  /** Listen for SIGHUP (the CLI does). Default true. */
  handleSignal?: boolean;
  debounceMs?: number;
}

/** Reload once; resolves when the outcome is logged. Never rejects. */
export async function reloadOnce(
  options: Omit<ReloadOnChangeOptions, "file" | "handleSignal" | "debounceMs">,
  trigger: ReloadTrigger,
): Promise<void> {
  const { app, logger } = options;
  let loaded: { config: ProxyConfig; warnings: string[] };
  try {
    loaded = await options.load();
  } catch (error) {
    const problems =
      error instanceof ConfigError
        ? error.issues.map((issue) => `${issue.path}: ${issue.message}`)
        : [errorMessage(error)];
    app.recordRejected(problems, trigger);
    logger.error(
      { trigger, outcome: "rejected", problems },
      `config reload rejected, the running configuration stays:\n${formatConfigError(error)}`,
    );
    return;
  }
  for (const warning of loaded.warnings) logger.warn(warning);
  try {
    const result = await app.reload(loaded.config, trigger);
    if (result.outcome === "applied") {
      logger.info(
        { trigger, outcome: result.outcome, upstreams: loaded.config.upstreams.length },
        "config reloaded",
      );
    } else if (result.outcome === "restart_required") {
      logger.warn(
        { trigger, outcome: result.outcome, restartRequired: result.paths },
        `config reload not applied: these changes need a restart: ${result.paths.join(", ")}`,
      );
    } else {
      logger.error(
        { trigger, outcome: result.outcome, problems: result.problems },
        `config reload rejected, the running configuration stays: ${result.problems.join("; ")}`,
      );
    }
  } catch (error) {
    // A bug in applying must not end the process either.
    logger.error({ err: error, trigger }, "config reload failed");
  }
}

/** Start watching; close the returned watcher at shutdown. */
export function reloadOnChange(options: ReloadOnChangeOptions): Promise<ConfigWatcher> {
  return watchConfig({
    file: options.file,
    handleSignal: options.handleSignal ?? true,
    ...(options.debounceMs !== undefined ? { debounceMs: options.debounceMs } : {}),
    onChange: (trigger) => reloadOnce(options, trigger),
    onWatchError: (error) =>
      options.logger.warn(
        { reason: error.message },
        "cannot watch the config file: only SIGHUP reloads",
      ),
  });
}
