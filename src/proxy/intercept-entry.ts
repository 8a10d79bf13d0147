/**
 * The third way in (issue 34): a tool that only speaks `https://` sends `CONNECT host:443`
 * through `HTTPS_PROXY`. For an authority that an `intercept: true` upstream's baseUrl names,
 * the CONNECT is terminated here — after the caller gate has answered the CONNECT itself — with
 * a leaf certificate for that host signed by the operator's interception CA, and every request
 * on the decrypted connection goes through the same pipeline as a plain one (the listener's
 * server takes the TLS socket as a connection of its own): routed to that upstream alone, as the
 * CONNECT's caller (tunnel.ts). Any other authority is refused 403 `host_not_allowed`, nothing
 * connected: bearer-proxy never opens a blind tunnel.
 *
 * A client that refuses the certificate (it doesn't trust the CA, or pins the host's own) fails
 * its handshake: one log line names the host and the CA it must trust, a metric counts it, and
 * the proxy goes on serving.
 */
import type { IncomingMessage } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { TLSSocket } from "node:tls";
import { authorityHost, connectAuthority } from "../base/authority.js";
import type { CallerGate, GateVerdict } from "../callers/caller-gate.js";
import type { CaSummary } from "../config/intercept-ca.js";
import type { LimitsConfig } from "../config/proxy-config.js";
import { PROXY_ERROR_STATUS, type ProxyErrorCode } from "../errors.js";
import {
  describeHandshakeFailure,
  type HandshakeFailureReason,
  handshakeFailureReason,
} from "../intercept/handshake-failure.js";
import { INTERCEPT_ALPN_PROTOCOLS, type LeafCertificates } from "../intercept/leaf-certificates.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import { NO_UPSTREAM } from "./proxied-request.js";
import { writeRawProxyError } from "./proxy-errors.js";
import type { RequestRecorder } from "./request-log.js";
import type { Route } from "./routing/route.js";
import type { RouteTable } from "./routing/route-table.js";
import { markTunnel } from "./tunnel.js";

/** The interception CA as the listener sees it (loaded before any port is bound). */
export interface InterceptCertificates {
  leaves(): LeafCertificates | undefined;
  ca(): CaSummary | undefined;
}

export interface InterceptEntryDeps {
  limits: LimitsConfig;
  routes: RouteTable;
  callerGate?: CallerGate | undefined;
  certificates: InterceptCertificates;
  metrics: Metrics;
  logger: Logger;
  recordRequest: RequestRecorder;
  /** Serves the decrypted connection as one of the listener's own. */
  serve(socket: TLSSocket): void;
}

/** The answer to an accepted CONNECT (RFC 9110 §9.3.6: any 2xx; the reason phrase is curl's). */
const ESTABLISHED = "HTTP/1.1 200 Connection established\r\n\r\n";

/**
 * The reason phrase of a 403 `host_not_allowed`: Python and wget print only a refused tunnel's
 * status line ("Tunnel connection failed: 403 …"), never the body (as CONNECT_REASON for 405).
 */
const NOT_INTERCEPTED_REASON = "Forbidden - bearer-proxy tunnels only the hosts it intercepts";

export class InterceptEntry {
  /** Connections being handshaken or served inside a tunnel. */
  private open = 0;
  /**
   * CONNECT sockets not yet handed to the listener (the gate, the leaf, the handshake): Node's
   * server no longer tracks them, so close() cannot end them; `destroyAll` does.
   */
  private readonly pending = new Set<Socket>();
  /** Set by destroyAll: handshakes cut by the proxy's own close are not the client's failures. */
  private closing = false;

  constructor(private readonly deps: InterceptEntryDeps) {}

  /** The listener's 'connect' event: Node hands the socket over with the bytes past the head. */
  accept(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const client = socket as Socket;
    // A socket Node handed over has no error listener left: a reset must not crash the process.
    client.on("error", ignore);
    this.pending.add(client);
    client.once("close", () => this.pending.delete(client));
    const startMs = performance.now();
    const authority = connectAuthority(req.url ?? "");
    if (authority === undefined) {
      this.refuse(
        req,
        client,
        startMs,
        "bad_request",
        "CONNECT needs an authority-form target: host:port",
      );
      return;
    }
    const route = this.deps.routes.interceptRoute(authority);
    if (route === undefined) {
      const intercepted = this.deps.routes.interceptedAuthorities;
      this.refuse(
        req,
        client,
        startMs,
        "host_not_allowed",
        `CONNECT to ${authority} is not intercepted by this proxy: it terminates CONNECT only for an upstream with intercept: true and that authority in its baseUrl (${intercepted.join(", ") || "none here"}), and never opens a blind tunnel`,
        { reason: NOT_INTERCEPTED_REASON },
      );
      return;
    }
    const verdict = this.deps.callerGate?.check(route.name, req);
    if (verdict === undefined) this.establish(req, client, head, route, authority, undefined);
    else if (verdict instanceof Promise) {
      void verdict.then((settled) =>
        this.admit(req, client, head, route, authority, settled, startMs),
      );
    } else this.admit(req, client, head, route, authority, verdict, startMs);
  }

  /** Connections handshaking or open inside a tunnel. */
  openConnections(): number {
    return this.open;
  }

  /**
   * Ends every CONNECT not yet served (at the end of close()'s grace, as upgrades are ended): a
   * client that never starts TLS would otherwise hold the listener's close until headersTimeout.
   */
  destroyAll(): void {
    this.closing = true;
    for (const client of this.pending) client.destroy();
    this.pending.clear();
  }

  private admit(
    req: IncomingMessage,
    client: Socket,
    head: Buffer,
    route: Route,
    authority: string,
    verdict: GateVerdict,
    startMs: number,
  ): void {
    if (client.destroyed) return;
    if (verdict.allowed) {
      this.establish(req, client, head, route, authority, verdict.caller);
      return;
    }
    this.refuse(req, client, startMs, verdict.code, verdict.message, {
      route,
      caller: verdict.caller,
      headers: verdict.headers,
      retryAfterSeconds: verdict.retryAfterSeconds,
    });
  }

  /** `200 Connection established`, then TLS with the host's leaf; a refused handshake is counted. */
  private establish(
    req: IncomingMessage,
    client: Socket,
    head: Buffer,
    route: Route,
    authority: string,
    caller: string | undefined,
  ): void {
    const leaves = this.deps.certificates.leaves();
    if (leaves === undefined) {
      // listen() loads the CA before any port is bound: this is a bug, cost one CONNECT.
      this.refuse(
        req,
        client,
        performance.now(),
        "internal_error",
        "the interception CA is not loaded",
      );
      return;
    }
    const host = authorityHost(authority);
    client.write(ESTABLISHED);
    this.open++;
    let settled = false;
    const closed = () => {
      if (settled) return;
      settled = true;
      this.open--;
    };
    client.once("close", closed);
    leaves.secureContextFor(host).then(
      (secureContext) => {
        if (client.destroyed) return;
        // The client may have sent its ClientHello with the CONNECT: it belongs to the TLS layer.
        if (head.length > 0) client.unshift(head);
        // The listener's sockets are half-open (node:http's own choice) and the TLS socket
        // inherits it: a client that hangs up mid-handshake, or refuses the leaf and leaves,
        // would hold its socket (and delay close()) until a timeout. The plain listener ends
        // the connection at the client's FIN too.
        client.allowHalfOpen = false;
        const tls = new TLSSocket(client, {
          isServer: true,
          secureContext,
          ALPNProtocols: [...INTERCEPT_ALPN_PROTOCOLS],
        });
        this.handshake(client, tls, route, host, authority, caller);
      },
      (err: unknown) => {
        this.deps.logger.error(
          { err, upstream: route.name, host },
          "no leaf certificate for an intercepted host",
        );
        client.destroy();
      },
    );
  }

  private handshake(
    client: Socket,
    tls: TLSSocket,
    route: Route,
    host: string,
    authority: string,
    caller: string | undefined,
  ): void {
    let secure = false;
    let failure: HandshakeFailureReason | undefined;
    // No parser reads these bytes yet: the headers timeout bounds the handshake instead.
    const timer = setTimeout(() => {
      failure = "timeout";
      tls.destroy();
    }, this.deps.limits.headersTimeoutMs);
    tls.once("secure", () => {
      secure = true;
      clearTimeout(timer);
      // The listener's server tracks it from here (close() ends it with its other connections).
      this.pending.delete(client);
      markTunnel(tls, { authority, caller });
      this.deps.serve(tls);
    });
    tls.on("error", (err) => {
      if (secure) return; // the listener's own handling from here on
      failure ??= handshakeFailureReason(err);
    });
    tls.once("close", () => {
      clearTimeout(timer);
      if (secure) return;
      // A Node client that distrusts the leaf closes without an alert: no 'error', only 'close'.
      this.handshakeFailed(route, host, failure ?? "closed");
    });
  }

  private handshakeFailed(route: Route, host: string, reason: HandshakeFailureReason): void {
    if (this.closing) return;
    this.deps.metrics.interceptHandshakeFailuresTotal.inc({ upstream: route.name, reason });
    const ca = this.deps.certificates.ca();
    const message = ca
      ? describeHandshakeFailure(reason, host, ca)
      : `TLS handshake for ${host} failed (${reason})`;
    this.deps.logger.warn({ upstream: route.name, host, reason }, message);
  }

  /** Answers the CONNECT with the proxy's error contract on the raw socket, logged and counted. */
  private refuse(
    req: IncomingMessage,
    client: Socket,
    startMs: number,
    code: ProxyErrorCode,
    message: string,
    extra: {
      route?: Route;
      caller?: string | undefined;
      headers?: Record<string, string | string[]> | undefined;
      retryAfterSeconds?: number | undefined;
      /** The status line's reason phrase, when the standard one would not say enough. */
      reason?: string;
    } = {},
  ): void {
    let fields = "";
    for (const [name, value] of Object.entries(extra.headers ?? {})) {
      for (const one of Array.isArray(value) ? value : [value]) fields += `${name}: ${one}\r\n`;
    }
    if (extra.retryAfterSeconds !== undefined) {
      fields += `retry-after: ${Math.max(0, Math.ceil(extra.retryAfterSeconds))}\r\n`;
    }
    writeRawProxyError(client, code, message, fields, extra.reason, extra.route?.name);
    const upstream = extra.route?.name ?? NO_UPSTREAM;
    this.deps.recordRequest({
      upstream,
      routed: false,
      method: "CONNECT",
      pathname: req.url ?? "",
      status: PROXY_ERROR_STATUS[code],
      startMs,
      bytesIn: 0,
      bytesOut: 0,
      replayed: false,
      errorCode: code,
      cause: undefined,
      caller: extra.caller,
      via: "connect",
    });
  }
}

function ignore(): void {}
