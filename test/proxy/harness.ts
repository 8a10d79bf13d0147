import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Dispatcher } from "undici";
import { loadConfig } from "../../src/config/load.js";
import type { ProxyConfig, UpstreamConfig } from "../../src/config/proxy-config.js";
import { createLifecycle, type Lifecycle } from "../../src/lifecycle.js";
import { createDispatcher } from "../../src/net/dispatcher.js";
import { createLogger } from "../../src/observability/logger.js";
import { createMetrics, type Metrics } from "../../src/observability/metrics.js";
import { createProxyServer, type ProxyServer } from "../../src/proxy/proxy-server.js";
import { groupUpstreamsByListener } from "../../src/proxy/routing/router.js";
import type { TokenProvider } from "../../src/token/token-provider.js";
import { createTokenRegistry, type TokenRegistry } from "../../src/token/token-registry.js";

/**
 * Builds a real proxy for a test: the config goes through the real loader (so defaults and
 * validation are the product's), dispatchers are the real ones (TLS verification on, trusting
 * only `caPem` on top of system CAs), and tokens are either stubs or the real token registry.
 */

export interface TestProxyOptions {
  /** The config document as a YAML file would hold it; `listen` defaults to 127.0.0.1:0. */
  config: Record<string, unknown>;
  /** CA the upstreams' certificates chain to; written to a temp file used as `tls.caFile`. */
  caPem?: string;
  /** Stub providers by upstream name, or "real" for the token registry. */
  tokens: "real" | Record<string, TokenProvider>;
  /** Log level of the captured logger. Default "info". */
  logLevel?: string;
}

export interface TestProxy {
  /** Port of the main listener. */
  port: number;
  /** `http://127.0.0.1:<port>`. */
  url: string;
  /** Every listener: the main one first. */
  listeners: { upstreams: readonly UpstreamConfig[]; address: AddressInfo; proxy: ProxyServer }[];
  config: ProxyConfig;
  metrics: Metrics;
  lifecycle: Lifecycle;
  registry: TokenRegistry | undefined;
  /** Parsed log records, in order. */
  logs: Record<string, unknown>[];
  dispatchers: Map<string, Dispatcher>;
  close(): Promise<void>;
}

const DEFAULT_CREDENTIALS = { clientId: "demo-client", clientSecret: "demo-secret" };

export async function startTestProxy(options: TestProxyOptions): Promise<TestProxy> {
  const dir = mkdtempSync(join(tmpdir(), "bp-proxy-test-"));
  let caFile: string | undefined;
  if (options.caPem) {
    caFile = join(dir, "ca.pem");
    writeFileSync(caFile, options.caPem);
  }
  const doc: Record<string, unknown> = {
    listen: { host: "127.0.0.1", port: 0 },
    ...options.config,
  };
  doc.upstreams = (doc.upstreams as Record<string, unknown>[]).map((u) => ({
    ...DEFAULT_CREDENTIALS,
    ...(caFile ? { tls: { caFile, ...(u.tls as object) } } : {}),
    ...u,
  }));
  const config = await loadConfig({ configText: JSON.stringify(doc), env: {}, cwd: dir });
  const logs: Record<string, unknown>[] = [];
  const logger = createLogger({
    level: options.logLevel ?? "info",
    format: "json",
    destination: { write: (line: string) => logs.push(JSON.parse(line)) },
  });
  const metrics = createMetrics({ collectProcessMetrics: false });
  const lifecycle = createLifecycle();
  const dispatchers = new Map<string, Dispatcher>();
  for (const upstream of config.upstreams) {
    dispatchers.set(
      upstream.name,
      createDispatcher({
        tls: upstream.tls,
        connections: upstream.connections,
        connectTimeoutMs: upstream.timeouts.connectMs,
        headersTimeoutMs: upstream.timeouts.responseHeadersMs,
        bodyTimeoutMs: upstream.timeouts.bodyIdleMs,
        idleConnectionMs: upstream.timeouts.idleConnectionMs,
        maxResponseHeaderSizeBytes: upstream.maxResponseHeaderSizeBytes,
        egressProxy: undefined,
        extraCaCertsFile: undefined,
      }),
    );
  }
  const registry =
    options.tokens === "real"
      ? createTokenRegistry({
          upstreams: config.upstreams,
          maxSources: config.tokenCache.maxSources,
          eagerLimit: 0,
          dispatcherFor: (u) => dispatchers.get(u.name)!,
          logger,
          metrics,
        })
      : undefined;
  const stubs = options.tokens === "real" ? undefined : options.tokens;
  const tokenFor = (name: string): TokenProvider => {
    if (registry) return registry.forUpstream(name);
    const stub = stubs?.[name];
    if (!stub) throw new Error(`no stub token provider for ${name}`);
    return stub;
  };
  const listeners: TestProxy["listeners"] = [];
  for (const group of groupUpstreamsByListener(config)) {
    if (!group.main && group.upstreams.length === 0) continue;
    const proxy = createProxyServer({
      config,
      listen: group.listen,
      upstreams: group.upstreams,
      tokenFor,
      dispatcherFor: (name) => dispatchers.get(name)!,
      metrics,
      logger,
      lifecycle,
    });
    listeners.push({ upstreams: group.upstreams, address: await proxy.listen(), proxy });
  }
  lifecycle.markRunning();
  const port = listeners[0]!.address.port;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    listeners,
    config,
    metrics,
    lifecycle,
    registry,
    logs,
    dispatchers,
    async close() {
      lifecycle.markDraining();
      await Promise.all(listeners.map((l) => l.proxy.close(1_000)));
      registry?.close();
      await Promise.all([...dispatchers.values()].map((d) => d.destroy().catch(() => {})));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The request log lines (message "request"). */
export function requestLogs(proxy: TestProxy): Record<string, unknown>[] {
  return proxy.logs.filter((l) => l.msg === "request");
}
