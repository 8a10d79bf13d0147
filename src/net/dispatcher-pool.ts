/**
 * The app's undici dispatchers: one per distinct connection setting (TLS files, pool size,
 * timeouts), not per upstream. An Agent keeps a pool per origin already, and a gateway with
 * thousands of upstreams on a few origins must not build thousands of Agents.
 */
import type { Dispatcher } from "undici";
import type { ProxyConfig, UpstreamConfig, UpstreamTls } from "../config/proxy-config.js";
import { createDispatcher, type DispatcherOptions } from "./dispatcher.js";

export interface DispatcherPool {
  /** The dispatcher for an upstream's API requests. */
  forUpstream(upstream: UpstreamConfig): Dispatcher;
  /** Same settings, but used only with `reset: true`: never hands out a reused connection. */
  forFreshConnection(upstream: UpstreamConfig): Dispatcher;
  /**
   * The dispatcher for an upstream's Upgrade requests: HTTP/1.1 always (an upgrade is an
   * HTTP/1.1 mechanism, RFC 9110 §7.8); the same one as `forUpstream` unless `http2` is on.
   */
  forUpgrade(upstream: UpstreamConfig): Dispatcher;
  /** The dispatcher for an upstream's token endpoint (its own TLS settings, see `token.tls`). */
  forTokenEndpoint(upstream: UpstreamConfig): Dispatcher;
  /** Every dispatcher built so far. */
  all(): Dispatcher[];
  /**
   * Close the dispatchers not in `inUse` (after a reload removed their last upstream); undici's
   * close lets the requests they carry finish first. A later use builds a new one.
   */
  closeUnused(inUse: ReadonlySet<Dispatcher>): Promise<void>;
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
    { allowH2 = false, reloadClientCertificate = false } = {},
  ): Dispatcher => {
    const settings: DispatcherOptions = {
      // Shared with the token endpoint's dispatcher when the settings match: harmless there.
      maxResponseHeaderSizeBytes: upstream.maxResponseHeaderSizeBytes,
      tls,
      // HTTP/2: one connection carries every request as a stream. undici's pool would open
      // another whenever requests queue for a moment (a burst), so it is capped at one.
      connections: allowH2 ? 1 : upstream.connections,
      connectTimeoutMs: upstream.timeouts.connectMs,
      headersTimeoutMs: upstream.timeouts.responseHeadersMs,
      bodyTimeoutMs: upstream.timeouts.bodyIdleMs,
      idleConnectionMs: upstream.timeouts.idleConnectionMs,
      egressProxy: config.egressProxy,
      ...(reloadClientCertificate ? { reloadClientCertificate } : {}),
      allowH2,
    };
    const key = JSON.stringify([purpose, settings]);
    let dispatcher = dispatchers.get(key);
    if (!dispatcher) {
      dispatcher = createDispatcher(settings);
      dispatchers.set(key, dispatcher);
    }
    return dispatcher;
  };
  // tls-client-auth: a provider may bind the token to the certificate (RFC 8705 §3), so the
  // upstream's certificate must follow a renewal as the token endpoint's does.
  const bound = (upstream: UpstreamConfig) => upstream.token.clientAuth === "tls-client-auth";
  return {
    forUpstream: (upstream) =>
      get(upstream, upstream.tls, "pooled", {
        allowH2: upstream.http2,
        reloadClientCertificate: bound(upstream),
      }),
    forFreshConnection: (upstream) =>
      get(upstream, upstream.tls, "fresh", {
        allowH2: upstream.http2,
        reloadClientCertificate: bound(upstream),
      }),
    forUpgrade: (upstream) =>
      get(upstream, upstream.tls, "pooled", { reloadClientCertificate: bound(upstream) }),
    forTokenEndpoint: (upstream) =>
      get(upstream, upstream.token.tls, "pooled", {
        // tls-client-auth: the certificate is the credential, and rotates like one.
        reloadClientCertificate: upstream.token.clientAuth === "tls-client-auth",
      }),
    all: () => [...dispatchers.values()],
    async closeUnused(inUse) {
      const unused = [...dispatchers].filter(([, d]) => !inUse.has(d));
      for (const [key] of unused) dispatchers.delete(key);
      await Promise.all(unused.map(([, d]) => d.close().catch(() => {})));
    },
    async close() {
      await Promise.all([...dispatchers.values()].map((d) => d.close().catch(() => {})));
    },
  };
}
