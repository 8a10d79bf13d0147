/**
 * The proxy listener's request handler: guards → route → headers → token → body → exchange,
 * then one log line and the metrics. The fast path (a token cached, no body) stays synchronous
 * from the request event to `dispatch`.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Readable } from "node:stream";
import type { Dispatcher } from "undici";
import type { LimitsConfig, UpstreamConfig } from "../config/types.js";
import { PROXY_ERROR_STATUS, type ProxyErrorCode } from "../errors.js";
import type { Lifecycle } from "../lifecycle.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import type { AccessToken, TokenProvider } from "../token/types.js";
import type { AccessLog } from "./access-log.js";
import { type ExchangeOutcome, startExchange } from "./forward.js";
import { createHeaderInjector, type HeaderInjector } from "./inject-headers.js";
import { mapUpstreamError, sendProxyError } from "./proxy-errors.js";
import { ClientBodyError, planBody, readBodyToBuffer, streamBody } from "./request-body.js";
import { checkRequest } from "./request-guards.js";
import { createRequestRecorder } from "./request-log.js";
import { createRouter, upstreamPath } from "./router.js";

export interface RequestHandlerDeps {
  limits: LimitsConfig;
  /** The upstreams served on this listener. */
  upstreams: readonly UpstreamConfig[];
  /** Called per request (cheap lookups expected): the registry may evict idle sources. */
  tokenFor(upstreamName: string): TokenProvider;
  dispatcherFor(upstreamName: string): Dispatcher;
  /** A dispatcher that keeps no idle connections, for the one retry after a reset. */
  freshDispatcherFor?: ((upstreamName: string) => Dispatcher) | undefined;
  metrics: Metrics;
  logger: Logger;
  /** Where the per-request access line goes (see access-log.ts). */
  accessLog: AccessLog;
  lifecycle: Lifecycle;
}

export interface RequestHandler {
  (req: IncomingMessage, res: ServerResponse): void;
  /** Requests currently being handled. */
  inFlight(): number;
  /** From now on every response carries `Connection: close`. */
  markClosing(): void;
}

/** What's fixed per upstream, computed once. */
interface UpstreamRoute {
  config: UpstreamConfig;
  injector: HeaderInjector;
}

interface FailExtra {
  headers?: Record<string, string> | undefined;
  retryAfterSeconds?: number | undefined;
  cause?: unknown;
  /** End the client connection after this answer. */
  close?: boolean;
}

const kBusy = Symbol("bearer-proxy.busy");
const kQueue = Symbol("bearer-proxy.queue");
type PipelinedSocket = IncomingMessage["socket"] & {
  [kBusy]?: boolean;
  [kQueue]?: (() => void)[];
};

/** Label used when a request was refused before it reached an upstream. */
const NO_UPSTREAM = "none";

export function createRequestHandler(deps: RequestHandlerDeps): RequestHandler {
  const { limits, metrics, lifecycle } = deps;
  const recordRequest = createRequestRecorder(metrics, deps.accessLog);
  const router = createRouter(deps.upstreams);
  const routes = new Map<string, UpstreamRoute>();
  for (const upstream of deps.upstreams) {
    routes.set(upstream.name, {
      config: upstream,
      injector: createHeaderInjector(upstream),
    });
  }
  const isKnownHost = (authority: string) => router.isKnownHost(authority);
  let inFlight = 0;
  let closing = false;

  /**
   * Pipelined requests on one connection are forwarded one after the other, as the client sent
   * them (Node emits them all at once): the upstream sees them in order, never in parallel.
   */
  const handler = ((req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket as PipelinedSocket;
    if (socket[kBusy]) {
      const queue = socket[kQueue] ?? [];
      socket[kQueue] = queue;
      queue.push(() => handle(req, res));
      return;
    }
    socket[kBusy] = true;
    handle(req, res);
  }) as RequestHandler;

  function next(socket: PipelinedSocket): void {
    socket[kBusy] = false;
    const queued = socket[kQueue]?.shift();
    if (!queued) return;
    socket[kBusy] = true;
    queued();
  }

  function handle(req: IncomingMessage, res: ServerResponse): void {
    if (req.socket.destroyed) {
      // A queued pipelined request whose client is gone: nothing to answer.
      next(req.socket as PipelinedSocket);
      return;
    }
    const startMs = performance.now();
    const method = req.method ?? "GET";
    let upstreamName = NO_UPSTREAM;
    let pathname = "";
    let bytesIn = () => 0;
    let finished = false;
    let routed = false;
    // Set while waiting for a token or body; aborted when the client hangs up.
    let abortWait: AbortController | undefined;
    let exchangeAbort: (() => void) | undefined;
    inFlight++;

    // A body still unread when we answer would have to be drained: close instead. (A request
    // without a body is not "complete" yet while its 'request' event runs, hence the check.)
    const hasBody =
      req.headers["transfer-encoding"] !== undefined ||
      (req.headers["content-length"] !== undefined && req.headers["content-length"] !== "0");
    const closeConnection = () =>
      closing || lifecycle.phase === "draining" || (hasBody && !req.complete);

    const finish = (outcome: Omit<ExchangeOutcome, "bytesOut"> & { bytesOut?: number }) => {
      if (finished) return;
      finished = true;
      inFlight--;
      next(req.socket as PipelinedSocket);
      recordRequest({
        upstream: upstreamName,
        routed,
        method,
        pathname,
        status: outcome.status,
        startMs,
        bytesIn: bytesIn(),
        bytesOut: outcome.bytesOut ?? 0,
        replayed: outcome.replayed,
        errorCode: outcome.errorCode,
        cause: outcome.cause,
      });
    };

    const fail = (code: ProxyErrorCode, message: string, extra: FailExtra = {}) => {
      sendProxyError(res, code, message, upstreamName === NO_UPSTREAM ? undefined : upstreamName, {
        headers: extra.headers,
        retryAfterSeconds: extra.retryAfterSeconds,
        close: extra.close === true || closeConnection(),
      });
      finish({
        status: PROXY_ERROR_STATUS[code],
        replayed: false,
        errorCode: code,
        cause: extra.cause,
      });
    };

    // `on`, not `once`: a response closes once, and `once` costs a wrapper per request.
    res.on("close", () => {
      if (res.writableFinished) return;
      abortWait?.abort();
      if (exchangeAbort) exchangeAbort();
      else finish({ status: 499, replayed: false, errorCode: "client_closed", cause: undefined });
    });

    try {
      proceed();
    } catch (err) {
      // A bug or a failing dependency (token registry, dispatcher lookup) must cost one request,
      // never the process: an exception here would otherwise escape into Node's parser.
      deps.logger.error({ err, upstream: upstreamName }, "request handler failed");
      fail("internal_error", "internal error", { cause: err, close: true });
    }

    function proceed(): void {
      const guard = checkRequest(req, limits, isKnownHost);
      if (guard.kind === "reject") {
        // A request this malformed says nothing good about the rest of the connection's bytes.
        fail(guard.code, guard.message, { headers: guard.headers, close: true });
        return;
      }
      pathname = guard.pathname;
      const upstream = router.route(guard.authority, guard.pathname);
      if (!upstream) {
        fail(
          "no_route",
          `no upstream matches this request; configured routes: ${router.routesDescription}`,
        );
        return;
      }
      const route = routes.get(upstream.name)!;
      upstreamName = upstream.name;
      routed = true;
      recordRequest.markInFlight(upstreamName);

      const injected = route.injector.build(req.rawHeaders, {
        // A getpeername() call: only when X-Forwarded-For will carry it.
        remoteAddress: upstream.forwardedHeaders ? req.socket.remoteAddress : undefined,
        authority: guard.authority,
      });
      if (injected.kind === "reject") {
        fail("bad_request", injected.message);
        return;
      }
      const plan = planBody(req, upstream.replayBodyLimitBytes);
      const tokens = deps.tokenFor(upstream.name);
      const path = upstreamPath(upstream, guard.pathAndQuery);

      const dispatch = (token: AccessToken, body: Buffer | Readable | null) => {
        if (finished) return;
        try {
          injected.headers[injected.authorizationIndex] = route.injector.authorization(token);
        } catch (err) {
          fail("internal_error", "the token can't be sent in a header", { cause: err });
          return;
        }
        const exchange = startExchange({
          req,
          res,
          upstream,
          tokens,
          dispatcher: deps.dispatcherFor(upstream.name),
          freshDispatcher: deps.freshDispatcherFor?.(upstream.name),
          method,
          path,
          headers: injected.headers,
          authorizationIndex: injected.authorizationIndex,
          authorization: route.injector.authorization,
          token,
          body,
          closeConnection,
          onDone: (outcome) => {
            exchangeAbort = undefined;
            finish(outcome);
          },
        });
        if (!finished) exchangeAbort = () => exchange.abortFromClient();
      };

      // Fast path: a cached token and no body — no promise, no allocation beyond the exchange.
      const cached = tokens.peekToken();
      if (cached && plan.kind === "none") {
        dispatch(cached, null);
        return;
      }
      void (async () => {
        try {
          let token = cached;
          if (!token) {
            abortWait = new AbortController();
            token = await tokens.getToken(abortWait.signal);
          }
          if (finished) return;
          let body: Buffer | Readable | null = null;
          if (plan.kind === "buffer") {
            const buffered = await readBodyToBuffer(req, plan.length, upstream.timeouts.bodyIdleMs);
            bytesIn = () => buffered.length;
            body = buffered;
          } else if (plan.kind === "stream") {
            const streamed = streamBody(req, upstream.timeouts.bodyIdleMs, (err) => {
              if (err.reason === "timeout") exchangeAbortForTimeout();
            });
            bytesIn = streamed.bytesRead;
            body = streamed.stream;
          }
          if (finished) return;
          dispatch(token, body);
        } catch (err) {
          if (finished) return;
          if (err instanceof ClientBodyError) {
            if (err.reason === "timeout") fail("request_timeout", "request body stalled");
            else
              finish({
                status: 499,
                replayed: false,
                errorCode: "client_closed",
                cause: undefined,
              });
            return;
          }
          const mapped = mapUpstreamError(err, upstream.name);
          fail(mapped.code, mapped.message, {
            retryAfterSeconds: mapped.retryAfterSeconds,
            cause: err,
          });
        }
      })();
    }

    /** A streamed upload stalled: answer 408 if we still can, and stop the upstream request. */
    function exchangeAbortForTimeout() {
      if (finished) return;
      if (!res.headersSent) {
        const abort = exchangeAbort;
        exchangeAbort = undefined;
        fail("request_timeout", "request body stalled");
        abort?.();
      } else {
        res.destroy();
      }
    }
  }

  handler.inFlight = () => inFlight;
  handler.markClosing = () => {
    closing = true;
  };
  return handler;
}
