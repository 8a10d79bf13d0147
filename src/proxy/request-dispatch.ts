/**
 * Dispatching a planned request: get the token (cached, or wait for one), read or stream the
 * body, pass the pacing gate (issue 26: wait for the request's turn, or answer 429), then start
 * the exchange with the upstream. The fast path (a token cached, no body, a free turn) stays
 * synchronous from the request event to `dispatch`: no promise, no timer.
 */
import type { Readable } from "node:stream";
import type { Dispatcher } from "undici";
import { addressLabel } from "../callers/types.js";
import type { LimitsConfig } from "../config/types.js";
import type { ProxyErrorCode } from "../errors.js";
import type { AccessToken, TokenProvider } from "../token/types.js";
import { startExchange } from "./forward.js";
import { type Admission, PacerClosedError } from "./pacing/limiter.js";
import { rateLimitValue } from "./pacing/ratelimit-headers.js";
import type { UpstreamPacing } from "./pacing/upstream-pacing.js";
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
  /** The upstream's pacing gate and retry policy; undefined: neither (one reset retry). */
  pacingFor?: ((upstreamName: string) => UpstreamPacing | undefined) | undefined;
}

/** A request with its token (and body, if any) in hand, on its way through the pacing gate. */
interface ReadyRequest {
  answer: RequestAnswer;
  plan: ForwardPlan;
  deps: DispatchDeps;
  tokens: TokenProvider;
  /** Replaced by a newer one when a wait for the turn outlived it. */
  token: AccessToken;
  body: Buffer | Readable | null;
}

/** Forwards `plan`; `answer` is finished exactly once, whatever happens. */
export function dispatchRequest(
  answer: RequestAnswer,
  plan: ForwardPlan,
  deps: DispatchDeps,
): void {
  const upstream = plan.route.config;
  const tokens = deps.tokenFor(upstream.name);
  const pacing = deps.pacingFor?.(upstream.name);
  // Fast path: a cached token and no body — no promise, no timer, one small object.
  const cached = tokens.peekToken();
  if (cached && plan.body.kind === "none") {
    pace({ answer, plan, deps, tokens, token: cached, body: null }, pacing);
    return;
  }
  void waitThenExchange(answer, plan, deps, tokens, cached, pacing);
}

async function waitThenExchange(
  answer: RequestAnswer,
  plan: ForwardPlan,
  deps: DispatchDeps,
  tokens: TokenProvider,
  cached: AccessToken | undefined,
  pacing: UpstreamPacing | undefined,
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
        token = await tokens.getToken(answer.abortWait.signal, wait);
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
    pace({ answer, plan, deps, tokens, token, body }, pacing);
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

/**
 * The pacing gate, consulted once per request right before the exchange: a free turn goes on at
 * once (synchronously), a request over the limit waits for its turn within `rateLimit.wait`
 * (or an upstream's pause), and one whose turn would come later is answered 429 with
 * Retry-After and the RateLimit fields.
 */
function pace(ready: ReadyRequest, pacing: UpstreamPacing | undefined): void {
  if (pacing === undefined) {
    exchange(ready, undefined, "", undefined);
    return;
  }
  const { answer } = ready;
  const key = budgetKey(answer, pacing);
  // The signal is made only when the request has to wait: a hang-up then ends the wait.
  const admission = pacing.pacer.acquire(key, () => waitSignalOf(answer));
  if (admission instanceof Promise) {
    const waitStartMs = performance.now();
    void waitForTurn(ready, pacing, key, admission, waitStartMs);
    return;
  }
  passGate(ready, pacing, key, admission);
}

function waitSignalOf(answer: RequestAnswer): AbortSignal {
  answer.abortWait ??= new AbortController();
  return answer.abortWait.signal;
}

/** The budget a request spends: the upstream's, or its caller's (`rateLimit.by: caller`). */
function budgetKey(answer: RequestAnswer, pacing: UpstreamPacing): string {
  if (!pacing.byCaller) return pacing.upstream;
  // The caller an `allow` list identified, else the TCP peer (the start log says so).
  return answer.caller ?? addressLabel(answer.req.socket.remoteAddress ?? "");
}

async function waitForTurn(
  ready: ReadyRequest,
  pacing: UpstreamPacing,
  key: string,
  turn: Promise<Admission>,
  waitStartMs: number,
): Promise<void> {
  const { answer } = ready;
  let admission: Admission;
  try {
    admission = await turn;
  } catch (err) {
    // The client hung up (the request is finished already), or the pacer closed under it.
    if (answer.finished) return;
    if (err instanceof PacerClosedError) {
      // A reload retired this upstream's pacer past shutdown.timeout, or the proxy is stopping.
      const message = "the proxy stopped pacing this upstream while the request waited";
      answer.fail("shutting_down", message, { retryAfterSeconds: 1, cause: err });
    } else {
      answer.fail("internal_error", "internal error", { cause: err });
    }
    return;
  }
  if (answer.finished) return;
  // A refusal after waiting (a pause that grew, a turn that moved) waited all the same.
  if (!admission.ok) answer.waitMs = performance.now() - waitStartMs;
  // A long wait may have outlived the token it started with.
  ready.token = ready.tokens.peekToken() ?? ready.token;
  passGate(ready, pacing, key, admission);
}

function passGate(
  ready: ReadyRequest,
  pacing: UpstreamPacing,
  key: string,
  admission: Admission,
): void {
  const { answer, plan } = ready;
  if (!admission.ok) {
    pacing.refused(admission.code);
    const headers =
      pacing.policy === undefined
        ? undefined
        : { "ratelimit-policy": pacing.policy, ratelimit: rateLimitValue(admission)! };
    answer.fail(admission.code, refusalMessage(admission.code, plan.route.config.name), {
      retryAfterSeconds: admission.retryAfterSeconds,
      headers,
    });
    return;
  }
  pacing.admitted(admission);
  answer.waitMs = admission.waitedMs;
  const value = pacing.policy === undefined ? undefined : rateLimitValue(admission);
  exchange(ready, pacing, key, value);
}

function refusalMessage(code: "rate_limited" | "upstream_rate_limited", upstream: string): string {
  return code === "rate_limited"
    ? `upstream ${upstream} is rate limited (upstreams[].rateLimit): no turn for this request within rateLimit.wait`
    : `upstream ${upstream} asked to slow down (Retry-After) for longer than this request may wait`;
}

function exchange(
  ready: ReadyRequest,
  pacing: UpstreamPacing | undefined,
  paceKey: string,
  rateLimit: string | undefined,
): void {
  const { answer, plan, deps, tokens, token, body } = ready;
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
    pacing,
    paceKey,
    rateLimit,
    onDone: (outcome) => {
      answer.abortExchange = undefined;
      answer.attempts = outcome.attempts ?? 0;
      answer.waitMs += outcome.waitedMs ?? 0;
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
