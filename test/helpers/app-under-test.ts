import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type App, buildApp } from "../../src/app/build-app.js";
import { loadConfig } from "../../src/config/load.js";
import type { ProxyConfig } from "../../src/config/proxy-config.js";
import { createLogger, type Logger } from "../../src/observability/logger.js";
import { createMetrics } from "../../src/observability/metrics.js";

/**
 * The whole product as a test sees it: a config document through the real loader, `buildApp`
 * with its real token registry, dispatchers, proxy listener(s) and admin server, all on
 * 127.0.0.1 port 0, and every log line captured — raw text (to search for leaked secrets) and
 * parsed records (to assert on messages).
 */

/** A logger whose every line is kept, as written and parsed. */
export interface CapturingLogger {
  logger: Logger;
  /** Raw JSON lines exactly as pino wrote them. */
  lines: string[];
  /** The same lines parsed. */
  records: Record<string, unknown>[];
}

export function createCapturingLogger(level = "info"): CapturingLogger {
  const lines: string[] = [];
  const records: Record<string, unknown>[] = [];
  const logger = createLogger({
    level,
    format: "json",
    destination: {
      write(line: string) {
        lines.push(line);
        records.push(JSON.parse(line) as Record<string, unknown>);
      },
    },
  });
  return { logger, lines, records };
}

export interface TestConfigOptions {
  /** The config document as a YAML file would hold it; `listen`/`admin` default to 127.0.0.1:0. */
  config: Record<string, unknown>;
  /** A CA trusted by every upstream and its token endpoint (written to a file, set as `tls.caFile`). */
  caPem?: string;
  /** Files written into the working folder first (secret files); config paths are relative to it. */
  files?: Record<string, string>;
}

/** A temp working folder holding the CA and secret files, and the loaded config. */
export interface LoadedTestConfig {
  config: ProxyConfig;
  dir: string;
  /** Absolute path of a file in `dir`. */
  pathOf(name: string): string;
  /** (Re)write a file in `dir` (secret rotation). */
  writeFile(name: string, content: string): string;
  /**
   * Another document through the real loader, in `dir` with the same CA and listener defaults:
   * what a reload reads (`app.reload(await load(doc))`).
   */
  load(config: Record<string, unknown>): Promise<ProxyConfig>;
  /** Remove `dir`. */
  cleanup(): void;
}

/** Write the files and CA, then run the document through the product's own `loadConfig`. */
export async function loadTestConfig(options: TestConfigOptions): Promise<LoadedTestConfig> {
  const dir = mkdtempSync(join(tmpdir(), "bp-hardening-"));
  const pathOf = (name: string) => join(dir, name);
  const writeFile = (name: string, content: string) => {
    writeFileSync(pathOf(name), content);
    return pathOf(name);
  };
  for (const [name, content] of Object.entries(options.files ?? {})) writeFile(name, content);
  const caFile = options.caPem === undefined ? undefined : writeFile("test-ca.pem", options.caPem);
  const load = (config: Record<string, unknown>) => {
    const doc: Record<string, unknown> = {
      listen: { host: "127.0.0.1", port: 0 },
      admin: { host: "127.0.0.1", port: 0 },
      ...config,
    };
    doc.upstreams = (doc.upstreams as Record<string, unknown>[]).map((upstream) =>
      caFile === undefined
        ? upstream
        : { ...upstream, tls: { caFile, ...(upstream.tls as object | undefined) } },
    );
    return loadConfig({ configText: JSON.stringify(doc), env: {}, cwd: dir });
  };
  try {
    const config = await load(options.config);
    return {
      config,
      dir,
      pathOf,
      writeFile,
      load,
      cleanup: () => rmSync(dir, { recursive: true, force: true }),
    };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

export interface AppUnderTestOptions extends TestConfigOptions {
  /** Log level of the captured logger. Default "info". */
  logLevel?: string;
  /** Grace given to in-flight requests by close(). Default 1000 ms. */
  closeTimeoutMs?: number;
  /** The caller failure throttle's clock (`AppDeps.throttleClock`). Default performance.now. */
  throttleClock?: () => number;
}

export interface AppUnderTest {
  app: App;
  config: ProxyConfig;
  /** `http://127.0.0.1:<port>` of the main proxy listener. */
  url: string;
  /** `http://127.0.0.1:<port>` of the admin listener. */
  adminUrl: string;
  /** Raw log lines, as written. */
  lines: string[];
  /** Parsed log records, in order. */
  records: Record<string, unknown>[];
  dir: string;
  /** (Re)write a file in the working folder (secret rotation). */
  writeFile(name: string, content: string): string;
  /** A document loaded as a reload reads it ({@link LoadedTestConfig.load}). */
  load(config: Record<string, unknown>): Promise<ProxyConfig>;
  /** Close the app (idempotent) and remove the working folder. */
  close(): Promise<void>;
}

/** Build the real app from a config document and bind every listener on 127.0.0.1 port 0. */
export async function startAppUnderTest(options: AppUnderTestOptions): Promise<AppUnderTest> {
  const loaded = await loadTestConfig(options);
  const captured = createCapturingLogger(options.logLevel ?? "info");
  const app = buildApp(loaded.config, {
    logger: captured.logger,
    metrics: createMetrics({ collectProcessMetrics: false }),
    ...(options.throttleClock ? { throttleClock: options.throttleClock } : {}),
  });
  let addresses: Awaited<ReturnType<App["listen"]>>;
  try {
    addresses = await app.listen();
  } catch (error) {
    await app.close(0).catch(() => {});
    loaded.cleanup();
    throw error;
  }
  let closing: Promise<void> | undefined;
  return {
    app,
    config: loaded.config,
    url: `http://127.0.0.1:${addresses.proxy[0]!.port}`,
    adminUrl: `http://127.0.0.1:${addresses.admin.port}`,
    lines: captured.lines,
    records: captured.records,
    dir: loaded.dir,
    writeFile: loaded.writeFile,
    load: loaded.load,
    close() {
      closing ??= app.close(options.closeTimeoutMs ?? 1_000).finally(loaded.cleanup);
      return closing;
    },
  };
}

/** Log records whose message contains `text`. */
export function logsMatching(records: readonly Record<string, unknown>[], text: string | RegExp) {
  return records.filter((r) => {
    const msg = typeof r.msg === "string" ? r.msg : "";
    return typeof text === "string" ? msg.includes(text) : text.test(msg);
  });
}
