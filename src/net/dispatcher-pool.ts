/**
 * The app's undici dispatchers: one per distinct connection setting (TLS files, pool size,
 * timeouts), not per upstream. An Agent keeps a pool per origin already, and a gateway with
 * thousands of upstreams on a few origins must not build thousands of Agents.
 */
import type { Dispatcher } from "undici";
import type { ProxyConfig, UpstreamConfig, UpstreamTls } from "../config/types.js";
import { createDispatcher, type DispatcherOptions } from "./dispatcher.js";

export interface DispatcherPool {
  /** The dispatcher for an upstream's API requests. */
  forUpstream(upstream: UpstreamConfig): Dispatcher;
  /** Same settings, but used only with `reset: true`: never hands out a reused connection. */
  forFreshConnection(upstream: UpstreamConfig): Dispatcher;
  /** The dispatcher for an upstream's token endpoint (its own TLS settings, see `token.tls`). */
  forTokenEndpoint(upstream: UpstreamConfig): Dispatcher;
  /** Close every dispatcher; errors are ignored (this runs at shutdown). */
  close(): Promise<void>;
}

/** Create the pool; dispatchers are built on first use and shared by equal settings. */
export function createDispatcherPool(config: Pick<ProxyConfig, "egressProxy">): DispatcherPool {
  const dispatchers = new Map<string, Dispatcher>();
  const get = (
    upstream: UpstreamConfig,
    tls: UpstreamTls,
    purpose = "pooled",
    reloadClientCertificate = false,
  ): Dispatcher => {
    const settings: DispatcherOptions = {
      // Shared with the token endpoint's dispatcher when the settings match: harmless there.
      maxResponseHeaderSizeBytes: upstream.maxResponseHeaderSizeBytes,
      tls,
      connections: upstream.connections,
      connectTimeoutMs: upstream.timeouts.connectMs,
      headersTimeoutMs: upstream.timeouts.responseHeadersMs,
      bodyTimeoutMs: upstream.timeouts.bodyIdleMs,
      idleConnectionMs: upstream.timeouts.idleConnectionMs,
      egressProxy: config.egressProxy,
      ...(reloadClientCertificate ? { reloadClientCertificate } : {}),
    };
    const key = JSON.stringify([purpose, settings]);
    let dispatcher = dispatchers.get(key);
    if (!dispatcher) {
      dispatcher = createDispatcher(settings);
      dispatchers.set(key, dispatcher);
    }
    return dispatcher;
  };
  return {
    forUpstream: (upstream) => get(upstream, upstream.tls),
    forFreshConnection: (upstream) => get(upstream, upstream.tls, "fresh"),
    forTokenEndpoint: (upstream) =>
      get(
        upstream,
        upstream.token.tls,
        "pooled",
        // tls-client-auth: the certificate is the credential, and rotates like one.
        upstream.token.clientAuth === "tls-client-auth",
      ),
    async close() {
      await Promise.all([...dispatchers.values()].map((d) => d.close().catch(() => {})));
    },
  };
}
