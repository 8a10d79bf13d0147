/**
 * Runs a built app: listen, announce, and shut down gracefully on SIGTERM/SIGINT or
 * POST /quitquitquit. Shutdown: /readyz fails at once, requests keep being served for
 * `shutdown.drainDelay` (so load balancers and kube-proxy stop sending), then listeners close
 * and in-flight requests get up to `shutdown.timeout`. A second signal exits at once.
 */
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { type App, buildApp } from "./app/build-app.js";
import type { ProxyConfig } from "./config/proxy-config.js";
import { errorMessage } from "./errors.js";
import type { Logger } from "./observability/logger.js";
import { createTracing } from "./observability/tracing.js";
import { VERSION } from "./version.js";

export interface RunningProxy {
  app: App;
  addresses: { proxy: AddressInfo[]; admin: AddressInfo };
  /** Resolves with the exit code once the proxy has shut down. */
  done: Promise<number>;
  /** Begin a graceful shutdown (what SIGTERM does). */
  shutdown(reason: string): Promise<number>;
}

export interface StartOptions {
  logger: Logger;
  /** Install SIGTERM/SIGINT handlers (the CLI does; tests don't). */
  handleSignals?: boolean;
  /** Called after shutdown finished, e.g. to stop a demo emulator. */
  onStopped?: () => Promise<void>;
  /** Where OTEL_* settings are read; default process.env. */
  env?: Readonly<Record<string, string | undefined>>;
}

/** Build and listen; resolves once every listener is bound (rejects, with nothing left bound, if one cannot be). */
export async function startProxy(
  config: ProxyConfig,
  options: StartOptions,
): Promise<RunningProxy> {
  const { logger } = options;
  let resolveDone: (code: number) => void = () => {};
  const done = new Promise<number>((resolve) => {
    resolveDone = resolve;
  });
  let shuttingDown: Promise<number> | undefined;

  const shutdown = (reason: string): Promise<number> => {
    if (shuttingDown) return shuttingDown;
    shuttingDown = (async () => {
      // The running configuration's (a reload may have changed them).
      const { drainDelayMs, timeoutMs } = app.config.shutdown;
      logger.info(
        { reason, drainDelayMs, timeoutMs },
        "shutting down: readiness now fails, draining",
      );
      app.lifecycle.markDraining();
      await sleep(drainDelayMs, undefined, { ref: false });
      let code = 0;
      try {
        await app.close(timeoutMs);
        // Spans still queued go out now (never rejects; a down collector costs its timeouts).
        await tracing.shutdown();
        if (options.onStopped) await options.onStopped();
        logger.info("stopped");
      } catch (error) {
        // Callers `void` this promise (signals, /quitquitquit): report, never reject.
        code = 1;
        logger.error({ reason: errorMessage(error) }, "shutdown failed");
      }
      resolveDone(code);
      return code;
    })();
    return shuttingDown;
  };

  // Off unless OTEL_TRACES_EXPORTER=otlp or tracing.exporter: then, and only then, the
  // OpenTelemetry SDK is loaded (once, here).
  const tracing = await createTracing({
    env: options.env ?? process.env,
    config: config.tracing,
    logger,
    serviceVersion: VERSION,
  });
  let app: App;
  let addresses: Awaited<ReturnType<App["listen"]>>;
  try {
    app = buildApp(config, {
      logger,
      onQuit: () => void shutdown("quitquitquit"),
      tracing,
    });
    addresses = await app.listen();
  } catch (error) {
    // A start that failed leaves no exporter timer behind it either.
    await tracing.shutdown();
    throw error;
  }

  if (options.handleSignals) {
    let firstSignalAtMs: number | undefined;
    const onSignal = (signal: NodeJS.Signals) => {
      const nowMs = performance.now();
      // One Ctrl-C under `npm start` arrives twice (the terminal signals the whole process
      // group and npm forwards it too): only a signal well after the first means "now".
      if (firstSignalAtMs !== undefined && nowMs - firstSignalAtMs < 500) return;
      if (firstSignalAtMs !== undefined) {
        logger.warn({ signal }, "second signal: exiting now");
        process.exit(1);
      }
      firstSignalAtMs = nowMs;
      void shutdown(signal);
    };
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
  }
  return { app, addresses, done, shutdown };
}
