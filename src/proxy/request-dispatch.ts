/**
 * Dispatching a planned request: get the token (cached, or wait for one), read or stream the
 * body, then start the exchange with the upstream. The fast path (a token cached, no body)
 * stays synchronous from the request event to `dispatch`.
 */
import type { Readable } from "node:stream";
import type { Dispatcher } from "undici";
import type { LimitsConfig } from "../config/types.js";
import type { ProxyErrorCode } from "../errors.js";
import type { AccessToken, TokenProvider } from "../token/types.js";
import { startExchange } from "./forward.js";
import { mapUpstreamError } from "./proxy-errors.js";
import type { RequestAnswer } from "./request-answer.js";
import {
  type BodyReadLimits,
  ClientBodyError,
  type ClientBodyFailure,
  readBodyToBuffer,
  streamBody,
} from "./request-body.js";
import type { ForwardPlan } from "./request-plan.js";

export interface DispatchDeps {
  limits: LimitsConfig;
  /** Called per request (cheap lookups expected): the registry may evict idle sources. */
  tokenFor(upstreamName: string): TokenProvider;
  dispatcherFor(upstreamName: string): Dispatcher;
  /** A dispatcher that keeps no idle connections, for the one retry after a reset. */
  freshDispatcherFor?: ((upstreamName: string) => Dispatcher) | undefined;
}

/** Forwards `plan`; `answer` is finished exactly once, whatever happens. */
export function dispatchRequest(
  answer: RequestAnswer,
  plan: ForwardPlan,
  deps: DispatchDeps,
): void {
  const upstream = plan.route.config;
  const tokens = deps.tokenFor(upstream.name);
  // Fast path: a cached token and no body — no promise, no allocation beyond the exchange.
  const cached = tokens.peekToken();
  if (cached && plan.body.kind === "none") {
    exchange(answer, plan, deps, tokens, cached, null);
    return;
  }
  void waitThenExchange(answer, plan, deps, tokens, cached);
}

async function waitThenExchange(
  answer: RequestAnswer,
  plan: ForwardPlan,
  deps: DispatchDeps,
  tokens: TokenProvider,
  cached: AccessToken | undefined,
): Promise<void> {
  const upstream = plan.route.config;
  const { req } = answer;
  try {
    let token = cached;
    if (!token) {
      answer.abortWait = new AbortController();
      // The wait is part of the request's trace: "where did the time go" often ends here.
      const wait = answer.span.startTokenSpan(upstream.name);
      try {
        token = await tokens.getToken(answer.abortWait.signal);
        wait.end();
      } catch (err) {
        wait.end(
          answer.abortWait.signal.aborted
            ? "client_closed"
            : mapUpstreamError(err, upstream.name).code,
        );
        throw err;
      }
    }
    if (answer.finished) return;
    let body: Buffer | Readable | null = null;
    const limits: BodyReadLimits = {
      idleMs: upstream.timeouts.bodyIdleMs,
      minRate: {
        bytesPerSecond: deps.limits.minRequestBodyRate,
        graceMs: deps.limits.minDataRateGraceMs,
      },
      maxBytes: plan.maxBodyBytes,
    };
    if (plan.body.kind === "buffer") {
      const buffered = await readBodyToBuffer(req, plan.body.length, limits);
      answer.bytesIn = () => buffered.length;
      body = buffered;
    } else if (plan.body.kind === "stream") {
      const streamed = streamBody(req, limits, (err) => {
        if (err.reason !== "aborted") uploadFailed(answer, err);
      });
      answer.bytesIn = streamed.bytesRead;
      body = streamed.stream;
    }
    if (answer.finished) return;
    exchange(answer, plan, deps, tokens, token, body);
  } catch (err) {
    if (answer.finished) return;
    if (err instanceof ClientBodyError) {
      if (err.reason === "aborted") answer.finishClientClosed();
      else answer.fail(BODY_FAILURE_CODE[err.reason], err.message);
      return;
    }
    const mapped = mapUpstreamError(err, upstream.name);
    answer.fail(mapped.code, mapped.message, {
      retryAfterSeconds: mapped.retryAfterSeconds,
      cause: err,
    });
  }
}

function exchange(
  answer: RequestAnswer,
  plan: ForwardPlan,
  deps: DispatchDeps,
  tokens: TokenProvider,
  token: AccessToken,
  body: Buffer | Readable | null,
): void {
  if (answer.finished) return;
  const { route } = plan;
  const upstream = route.config;
  try {
    plan.headers[plan.authorizationIndex] = route.injector.authorization(token);
  } catch (err) {
    answer.fail("internal_error", "the token can't be sent in a header", { cause: err });
    return;
  }
  const running = startExchange({
    req: answer.req,
    res: answer.res,
    upstream,
    tokens,
    dispatcher: deps.dispatcherFor(upstream.name),
    freshDispatcher: deps.freshDispatcherFor?.(upstream.name),
    method: answer.method,
    path: plan.path,
    headers: plan.headers,
    authorizationIndex: plan.authorizationIndex,
    dpopIndex: plan.dpopIndex,
    authorization: route.injector.authorization,
    token,
    body,
    closeConnection: answer.closeConnection,
    minResponseRate: deps.limits.minResponseRate,
    minDataRateGraceMs: deps.limits.minDataRateGraceMs,
    span: answer.span,
    onDone: (outcome) => {
      answer.abortExchange = undefined;
      answer.finish(outcome);
    },
  });
  if (!answer.finished) answer.abortExchange = () => running.abortFromClient();
}

/** What the client is told when its body fails a limit. */
const BODY_FAILURE_CODE = {
  timeout: "request_timeout",
  too_slow: "request_timeout",
  too_large: "payload_too_large",
} as const satisfies Record<Exclude<ClientBodyFailure, "aborted">, ProxyErrorCode>;

/**
 * A streamed upload stalled, was too slow or too large: answer (408/413) if nothing was
 * answered yet, else cut the client connection; either way the upstream request is aborted.
 */
function uploadFailed(answer: RequestAnswer, err: ClientBodyError): void {
  if (answer.finished || err.reason === "aborted") return;
  if (!answer.res.headersSent) {
    const abort = answer.abortExchange;
    answer.abortExchange = undefined;
    answer.fail(BODY_FAILURE_CODE[err.reason], err.message);
    abort?.();
  } else {
    answer.res.destroy();
  }
}
