/**
 * The proxy listener: a plain `node:http` server whose handler forwards with undici `dispatch`
 * on a per-upstream dispatcher.
 *
 * Why not fastify + @fastify/http-proxy on this path (fastify serves the admin listener):
 * - speed: reply-from costs ~40% of throughput against a minimal undici forwarder on small GETs;
 * - safety: reply-from turns upstream certificate verification off by default with undici;
 * - control it doesn't give: the bounded 401-replay buffer, exact paths, exact hop-by-hop and
 *   credential header handling, and framing checks on the raw request (RFC 9112);
 * - the early-answer collapse: undici drops the connection when the upstream answers while a
 *   body is still streaming; we buffer bodies up to replayBodyLimit and dispatch a Buffer, so the
 *   connection is kept (see request-body.ts).
 *
 * Node defaults overridden here: timeouts are checked every second (not 30 s), `maxHeadersCount`
 * sits one above our limit so a request over it is refused instead of silently truncated, the
 * whole-request timeout is off (a 1 GiB upload must pass) with a body idle timeout instead, and
 * the lenient parser is never enabled.
 */

import { once } from "node:events";
import type { AddressInfo, Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { CallerGate } from "../callers/caller-gate.js";
import type { ListenSpec, ProxyConfig, UpstreamConfig } from "../config/proxy-config.js";
import type { Lifecycle } from "../lifecycle.js";
import {
  createServer,
  type IncomingMessage,
  type Server,
  type ServerOptions,
  type ServerResponse,
} from "../net/node-http.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import type { Tracing } from "../observability/tracing.js";
import { type AccessLog, createAccessLog } from "./access-log.js";
import { answerClientError } from "./client-errors.js";
import { type InterceptCertificates, InterceptEntry } from "./intercept-entry.js";
import { createLingeringClose } from "./lingering-close.js";
import { CONNECT_REASON, writeRawProxyError } from "./proxy-errors.js";
import { createRequestEntry, type RequestEntry } from "./request-entry.js";
import { connectRejection } from "./request-guards.js";
import { createRequestRecorder, type RequestRecorder } from "./request-log.js";
import { buildRoutes, type RouteSources } from "./routing/route.js";
import { RouteTable } from "./routing/route-table.js";
import { UpgradeEntry } from "./upgrade-entry.js";

/** What a listener routes by: its upstreams, where their parts come from, who may use them. */
export interface ProxyRouting extends RouteSources {
  /** The upstreams served on this listener (see `groupUpstreamsByListener`). */
  upstreams: readonly UpstreamConfig[];
  /** Who may use which upstream (`upstreams[].allow`); undefined: everyone. */
  callerGate?: CallerGate | undefined;
}

export interface ProxyServerDeps extends ProxyRouting {
  config: ProxyConfig;
  /** Where this listener binds. */
  listen: ListenSpec;
  /** Request and upstream-attempt spans; default: off. */
  tracing?: Tracing | undefined;
  metrics: Metrics;
  logger: Logger;
  /**
   * The per-request access line (info). Default: `createAccessLog(logger)`, line by line to the
   * logger's destination; pass one created with `batch` to write stdout in batches (see
   * access-log.ts). Flushed by `close()`.
   */
  accessLog?: AccessLog | undefined;
  lifecycle: Lifecycle;
  /**
   * The interception CA (`intercept`): CONNECT to an `intercept: true` upstream's authority is
   * terminated (intercept-entry.ts). Undefined: every CONNECT is answered 405, as without it.
   */
  intercept?: InterceptCertificates | undefined;
}

export interface ProxyServer {
  server: Server;
  /** Binds `listen`; resolves with the bound address (port 0 picks one). */
  listen(): Promise<AddressInfo>;
  /**
   * Stops accepting, closes idle keep-alive connections, lets in-flight requests finish (their
   * responses carry `Connection: close`) for up to `timeoutMs`, then destroys what remains —
   * connections lingering after their answer (lingering-close.ts) included.
   */
  close(timeoutMs: number): Promise<void>;
  /** Requests being handled right now (every routing generation). */
  inFlight(): number;
  /**
   * Serve new requests with these upstreams (and `limits` and `paths`, when given) from now on
   * (a config reload); requests already running finish with the routing they started with.
   */
  replaceRouting(routing: ProxyRouting, rules?: RequestRules): void;
  /** Requests (and upgraded connections) still running on a routing replaced by a reload. */
  retiredInFlight(): number;
}

/** How often Node checks headersTimeout/requestTimeout; its default (30 s) makes them useless. */
const TIMEOUT_CHECK_INTERVAL_MS = 1_000;

/** The parts of the config each request is checked against; a reload may change them. */
export type RequestRules = Pick<ProxyConfig, "limits" | "paths">;

/** One routing generation of a listener: its routes, built once, and the ways in that use them. */
interface Generation {
  requests: RequestEntry;
  upgrades: UpgradeEntry;
  /** CONNECT terminated for intercepted upstreams; undefined without `intercept`. */
  intercepts: InterceptEntry | undefined;
}

const inFlightOf = (generation: Generation) =>
  generation.requests.inFlight() + generation.upgrades.inFlight();

export function createProxyServer(deps: ProxyServerDeps): ProxyServer {
  return new ProxyListener(deps);
}

class ProxyListener implements ProxyServer {
  readonly server: Server;
  /**
   * A reload swaps `current`; requests already running finish on their own generation, and an
   * old generation is forgotten once nothing runs on it any more. The per-connection queue lives
   * on the socket, so ordering holds across a swap.
   */
  private current: Generation;
  private readonly generations: Set<Generation>;
  private closing = false;
  private readonly accessLog: AccessLog;
  private readonly recordRequest: RequestRecorder;
  /**
   * A `Connection: close` answer sent before the client finished its body must not turn into a
   * RST that loses it (lingering-close.ts).
   */
  private readonly lingering = createLingeringClose();

  constructor(private readonly deps: ProxyServerDeps) {
    this.accessLog = deps.accessLog ?? createAccessLog(deps.logger);
    this.recordRequest = createRequestRecorder(deps.metrics, this.accessLog);
    this.current = this.buildGeneration(deps, deps.config);
    this.generations = new Set([this.current]);
    this.server = this.createServer();
  }

  async listen(): Promise<AddressInfo> {
    this.server.listen(this.deps.listen.port, this.deps.listen.host);
    await once(this.server, "listening");
    return this.server.address() as AddressInfo;
  }

  async close(timeoutMs: number): Promise<void> {
    const { server } = this;
    this.closing = true;
    for (const generation of this.generations) generation.requests.markClosing();
    if (!server.listening) {
      this.accessLog.flush();
      return;
    }
    const closed = once(server, "close");
    server.close();
    server.closeIdleConnections();
    const timer = setTimeout(() => {
      server.closeAllConnections();
      // Answered already; their linger ends with the grace.
      this.lingering.destroyAll();
      // Upgraded connections and CONNECTs not yet served are Node's no more: only we can end them.
      for (const generation of this.generations) {
        generation.upgrades.destroyAll();
        generation.intercepts?.destroyAll();
      }
    }, timeoutMs);
    try {
      await closed;
    } finally {
      clearTimeout(timer);
      // The last requests' lines, if batched.
      this.accessLog.flush();
    }
  }

  inFlight(): number {
    let count = 0;
    for (const generation of this.generations) count += inFlightOf(generation);
    return count;
  }

  retiredInFlight(): number {
    let count = 0;
    for (const generation of this.generations) {
      if (generation !== this.current) count += inFlightOf(generation);
    }
    return count;
  }

  replaceRouting(routing: ProxyRouting, rules: RequestRules = this.deps.config): void {
    const next = this.buildGeneration(routing, rules);
    if (this.closing) next.requests.markClosing();
    for (const generation of this.generations) {
      if (inFlightOf(generation) === 0) this.generations.delete(generation);
    }
    this.generations.add(next);
    this.current = next;
  }

  private buildGeneration(routing: ProxyRouting, rules: RequestRules): Generation {
    const { deps } = this;
    const routes = new RouteTable(
      buildRoutes(routing.upstreams, routing, { dropTraceContext: deps.tracing?.enabled }).values(),
    );
    const entryDeps = {
      limits: rules.limits,
      paths: rules.paths,
      routes,
      callerGate: routing.callerGate,
      tracing: deps.tracing,
      logger: deps.logger,
      recordRequest: this.recordRequest,
      lifecycle: deps.lifecycle,
    };
    const requests = createRequestEntry(entryDeps);
    // WebSocket and other Upgrade requests (see upgrade-entry.ts).
    const upgrades = new UpgradeEntry({
      ...entryDeps,
      metrics: deps.metrics,
      serveAsRequest: requests,
      upgradeLoad: deps.lifecycle.upgrades,
    });
    const { intercept } = deps;
    const intercepts =
      intercept === undefined
        ? undefined
        : new InterceptEntry({
            limits: rules.limits,
            routes,
            callerGate: routing.callerGate,
            certificates: intercept,
            metrics: deps.metrics,
            logger: deps.logger,
            recordRequest: this.recordRequest,
            // The decrypted connection is one of this listener's: the same parser settings,
            // timeouts, queue and ways in as any other.
            serve: (socket) => this.server.emit("connection", socket),
          });
    return { requests, upgrades, intercepts };
  }

  /** The node:http server with the overrides above, its events wired to the current generation. */
  private createServer(): Server {
    const { limits } = this.deps.config;
    const { logger, metrics } = this.deps;
    const handler = (req: IncomingMessage, res: ServerResponse) => this.current.requests(req, res);
    // @types/node follows Node 20, which lacks the last option; typed here, so a misspelt one
    // still fails to compile.
    const options: ServerOptions & { optimizeEmptyRequests?: boolean } = {
      maxHeaderSize: limits.maxHeaderSizeBytes,
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: 0,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS,
      // Checked by the guards, so the 400 has our error shape.
      requireHostHeader: false,
      joinDuplicateHeaders: false,
      insecureHTTPParser: false,
      // Node 24.12+: a request without Content-Length or Transfer-Encoding has no body, so it
      // arrives ended and skips its stream's 'data'/'end'/'close' life (~2 % of a small GET's
      // CPU, bench/PROFILE.md). A hang-up is watched on the response, never on such a request.
      // Older Nodes ignore the option.
      optimizeEmptyRequests: true,
    };
    const server = createServer(options, handler);
    server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) =>
      this.current.upgrades.accept(req, socket, head),
    );
    server.maxHeadersCount = limits.maxHeaderCount + 1;
    server.maxConnections = limits.maxConnections;
    // Socket inactivity is governed by headersTimeout, keepAliveTimeout and the body idle timeouts.
    server.timeout = 0;
    // Runs after Node's own 'connection' listener.
    server.on("connection", (socket: Socket) => this.lingering.watch(socket));
    const countClientError = (code: string) => metrics.errorsTotal.inc({ upstream: "none", code });
    server.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex) => {
      answerClientError(err, socket, (answer) => {
        countClientError(answer.code);
        logger.debug({ errorCode: answer.code, parserCode: err.code }, "client error");
      });
    });
    // Without a listener Node answers an Expect other than 100-continue with a bare 417; through
    // the handler it gets the error contract, a log line and the metric (guard-stage.ts).
    server.on("checkExpectation", handler);
    // maxConnections: Node closes the connection before any byte is read (nothing can be
    // answered); count it so the refusals are visible.
    server.on("drop", () => {
      countClientError("connection_dropped");
      logger.debug("connection dropped: limits.maxConnections reached");
    });
    // Node hands CONNECT to this event (never to the request handler).
    server.on("connect", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      const intercepts = this.current.intercepts;
      if (intercepts !== undefined) {
        intercepts.accept(req, socket, head);
        return;
      }
      const rejection = connectRejection();
      countClientError(rejection.code);
      writeRawProxyError(
        socket,
        rejection.code,
        rejection.message,
        "allow: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS\r\n",
        CONNECT_REASON,
      );
    });
    return server;
  }
}
