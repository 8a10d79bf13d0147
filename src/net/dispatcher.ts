/**
 * undici dispatchers for upstreams and token endpoints. Each app builds its own (never
 * setGlobalDispatcher), with certificate verification always on: system CAs, plus
 * NODE_EXTRA_CA_CERTS and the upstream's `tls.caFile` when one is configured.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createSecureContext, rootCertificates, type SecureContext } from "node:tls";
import type { Dispatcher } from "undici";
import type { UpstreamTls } from "../config/proxy-config.js";
import { createUpstreamConnector } from "./read-after-write-reset.js";
import { createReloadingConnector } from "./reloading-connector.js";
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
  /**
   * Offer HTTP/2 in the TLS handshake (ALPN h2, http/1.1): an upstream that picks h2 gets
   * multiplexed streams on one connection. Default false.
   */
  allowH2?: boolean | undefined;
  /** Explicitly configured egress proxy; environment HTTP(S)_PROXY is ignored on purpose. */
  egressProxy: string | undefined;
  /**
   * Largest response header block (undici maxHeaderSize, whose own default is 16 KiB): the
   * upstream's `maxResponseHeaderSize`.
   */
  maxResponseHeaderSizeBytes?: number | undefined;
  /** NODE_EXTRA_CA_CERTS value; injected so tests control it. */
  extraCaCertsFile?: string | undefined;
  /**
   * Re-read `tls.certFile`/`keyFile` when they change, for new connections (tls-client-auth's
   * certificate rotates without a restart). Not through an egress proxy.
   */
  reloadClientCertificate?: boolean | undefined;
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
      context =
        (tls.caFile ? rootsPlus([extraCa, ca], cert, key) : undefined) ??
        createSecureContext({
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

/**
 * A context that trusts Node's roots (bundled, or the system's under --use-openssl-ca) plus
 * `pems` (empty strings skipped), built the cheap way: a default context gets the PEMs through
 * its native `addCACert`, which first gives the context its own copy of the roots (parsed once
 * per process, shared by reference; node/src/crypto/crypto_context.cc, SetCACert). Handing the
 * ~145 roots over as `ca: [...]` instead makes OpenSSL parse and insert each one again: 25–45 ms
 * of CPU on Node 20 against 1–2 ms this way, 14 against 9 ms on Node 24 — on Node 20 the
 * largest single step of a start (bench/PROFILE.md, "Footprint: the start near the floor"). The
 * copy holds the roots, not NODE_EXTRA_CA_CERTS (the caller passes it), as `ca` did. Node does
 * not document the native handle: without it, undefined (the caller then builds the `ca` list).
 */
function rootsPlus(pems: string[], cert?: Buffer, key?: Buffer): SecureContext | undefined {
  const context = createSecureContext({
    minVersion: "TLSv1.2",
    ...(cert && key ? { cert, key } : {}),
  });
  const native = (context as { context?: { addCACert?: unknown } }).context;
  if (typeof native?.addCACert !== "function") return undefined;
  for (const pem of pems) if (pem !== "") native.addCACert(pem);
  return context;
}

/** Streams in flight at once on the one HTTP/2 connection of an upstream. */
const H2_STREAMS_PER_CONNECTION = 100;

/**
 * undici sends a non-idempotent request (POST, PATCH) on an HTTP/2 connection only when no other
 * request is in flight on it (client-h2 `busy`), so that a failing session can't take a
 * retryable request down with it. With one multiplexed connection that serialises every POST
 * behind all other traffic. The proxy never retries a non-idempotent request on its own
 * (the exchange, src/proxy/exchange/), so the caution buys nothing here: requests are marked idempotent for the
 * dispatcher's scheduling only. Streamed bodies still wait (undici keeps that check).
 */
class MultiplexingAgent extends Agent {
  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler) {
    return super.dispatch({ ...options, idempotent: true }, handler);
  }
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
    ...(options.maxResponseHeaderSizeBytes
      ? { maxHeaderSize: options.maxResponseHeaderSizeBytes }
      : {}),
    allowH2: options.allowH2 === true,
    // No redirect interceptor: undici 7 never follows redirects without one, and a token must
    // never follow a redirect to another host (undici CVE history).
  };
  if (options.egressProxy) {
    return new ProxyAgent({ uri: options.egressProxy, requestTls: connect, ...common });
  }
  const { certFile, keyFile } = options.tls;
  if (options.reloadClientCertificate && certFile && keyFile) {
    const extraCa = options.extraCaCertsFile ?? process.env.NODE_EXTRA_CA_CERTS;
    const build = () => ({
      ...buildTlsOptions(options.tls, extraCa),
      timeout: options.connectTimeoutMs,
      // A connector function offers h2 in ALPN only when built with it.
      ...(options.allowH2 ? { allowH2: true } : {}),
    });
    if (options.allowH2) {
      const connect = createReloadingConnector([certFile, keyFile], build);
      return new MultiplexingAgent({ connect, ...common, pipelining: H2_STREAMS_PER_CONNECTION });
    }
    const reloading = createReloadingConnector([certFile, keyFile], build, createUpstreamConnector);
    return new Agent({ connect: reloading, ...common });
  }
  if (options.allowH2) {
    // undici's Client defaults to one request at a time (pipelining 1) whatever the protocol: an
    // HTTP/2 connection carries only as many streams at once as `pipelining` allows. 100 is
    // undici's own H2CClient default and the usual server limit (SETTINGS_MAX_CONCURRENT_STREAMS).
    return new MultiplexingAgent({ connect, ...common, pipelining: H2_STREAMS_PER_CONNECTION });
  }
  // Keeps an upstream's early answer when it resets the connection mid-upload (issue 15).
  return new Agent({ connect: createUpstreamConnector(connect), ...common });
}
