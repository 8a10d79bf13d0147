/**
 * undici dispatchers for upstreams and token endpoints. Each app builds its own (never
 * setGlobalDispatcher), with certificate verification always on: system CAs, plus
 * NODE_EXTRA_CA_CERTS and the upstream's `tls.caFile` when one is configured.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createSecureContext, rootCertificates, type SecureContext } from "node:tls";
import type { Dispatcher } from "undici";
import type { UpstreamTls } from "../config/types.js";
import { Agent, ProxyAgent } from "./undici-core.js";

export interface DispatcherOptions {
  tls: UpstreamTls;
  /** Keep-alive connections per origin. */
  connections: number;
  connectTimeoutMs: number;
  /** Time to wait for response headers (undici headersTimeout). */
  headersTimeoutMs: number;
  /** Longest silence while a body streams (undici bodyTimeout). */
  bodyTimeoutMs: number;
  /** Idle keep-alive connections close after this unless the server announces a limit. */
  idleConnectionMs: number;
  /** Explicitly configured egress proxy; environment HTTP(S)_PROXY is ignored on purpose. */
  egressProxy: string | undefined;
  /** NODE_EXTRA_CA_CERTS value; injected so tests control it. */
  extraCaCertsFile?: string | undefined;
}

/**
 * Secure contexts by the contents of their files: the upstream, its retry dispatcher and its
 * token endpoint usually share one (each would hold its own parsed copy of ~140 roots, ~1 MiB
 * of RSS). Keyed by content, so a file that changed between two apps in one process (tests,
 * `check` after an edit) never gets a stale context.
 */
const secureContexts = new Map<string, SecureContext>();

/**
 * TLS options shared by token requests and forwarded requests. Passing `ca` replaces Node's
 * default store (which is where NODE_EXTRA_CA_CERTS lives), so rebuild it: system roots +
 * NODE_EXTRA_CA_CERTS + the configured CA file. The secure context is built once: handing
 * ~140 roots to every tls.connect costs ~60 ms of CPU per new connection.
 */
export function buildTlsOptions(tls: UpstreamTls, extraCaCertsFile: string | undefined) {
  const options: {
    rejectUnauthorized: true;
    minVersion: "TLSv1.2";
    secureContext?: SecureContext;
    servername?: string;
  } = { rejectUnauthorized: true, minVersion: "TLSv1.2" };
  const needsContext = Boolean(tls.caFile || (tls.certFile && tls.keyFile));
  if (needsContext) {
    const extraCa = tls.caFile && extraCaCertsFile ? readFileSync(extraCaCertsFile, "utf8") : "";
    const ca = tls.caFile ? readFileSync(tls.caFile, "utf8") : "";
    const cert = tls.certFile && tls.keyFile ? readFileSync(tls.certFile) : undefined;
    const key = tls.certFile && tls.keyFile ? readFileSync(tls.keyFile) : undefined;
    const cacheKey = createHash("sha256")
      .update(JSON.stringify([extraCa, ca, cert?.toString("base64"), key?.toString("base64")]))
      .digest("hex");
    let context = secureContexts.get(cacheKey);
    if (!context) {
      context = createSecureContext({
        minVersion: "TLSv1.2",
        ...(tls.caFile ? { ca: [...rootCertificates, ...(extraCa ? [extraCa] : []), ca] } : {}),
        ...(cert && key ? { cert, key } : {}),
      });
      secureContexts.set(cacheKey, context);
    }
    options.secureContext = context;
  }
  if (tls.serverName) options.servername = tls.serverName;
  return options;
}

/** An Agent (or ProxyAgent with `egressProxy`) that verifies certificates and never follows redirects. */
export function createDispatcher(options: DispatcherOptions): Dispatcher {
  const connect = {
    ...buildTlsOptions(options.tls, options.extraCaCertsFile ?? process.env.NODE_EXTRA_CA_CERTS),
    timeout: options.connectTimeoutMs,
  };
  const common = {
    connections: options.connections,
    headersTimeout: options.headersTimeoutMs,
    bodyTimeout: options.bodyTimeoutMs,
    keepAliveTimeout: options.idleConnectionMs,
    // No redirect interceptor: undici 7 never follows redirects without one, and a token must
    // never follow a redirect to another host (undici CVE history).
  };
  if (options.egressProxy) {
    return new ProxyAgent({ uri: options.egressProxy, requestTls: connect, ...common });
  }
  return new Agent({ connect, ...common });
}
