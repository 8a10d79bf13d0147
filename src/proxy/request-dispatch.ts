/**
 * Dispatching a planned request: get the token (cached, or wait for one), read or stream the
 * body, pass the pacing gate (issue 26: wait for the request's turn, or answer 429), then start
 * the exchange with the upstream. The fast path (a token cached, no body, a free turn) stays
 * synchronous from the request event to `dispatch`: no promise, no timer.
 */
import type { Readable } from "node:stream";
import type { Dispatcher } from "undici";
import type { LimitsConfig } from "../config/types.js";
import type { ProxyErrorCode } from "../errors.js";
import type { AccessToken, TokenProvider } from "../token/types.js";
import { startExchange } from "./forward.js";
import type { ProcessLoad } from "./overload.js";
import {
  budgetKey,
  type GateRefusal,
  type PacedRequest,
  passGate,
  type WaitingPlaces,
} from "./pacing/gate.js";
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
  /** The process load a request counts in (`limits.maxInFlight`), left while it waits. */
  load: ProcessLoad;
  /** Where a request waits for its turn, out of `load` (`limits.maxWaiting`). */
  waiting: WaitingPlaces;
}

/** A request with its token (and body, if any) in hand, on its way through the pacing gate. */
class ReadyRequest implements PacedRequest {
  constructor(
    readonly answer: RequestAnswer,
    readonly plan: ForwardPlan,
    readonly deps: DispatchDeps,
    readonly tokens: TokenProvider,
    /** Replaced by a newer one when a wait for the turn outlived it. */
    public token: AccessToken,
    readonly body: Buffer | Readable | null,
  ) {}

  get finished(): boolean {
    return this.answer.finished;
  }

  get caller(): string | undefined {
    return this.answer.caller;
  }

  get peer() {
    return this.answer.req.socket;
  }

  waitSignal(): AbortSignal {
    this.answer.abortWait ??= new AbortController();
    return this.answer.abortWait.signal;
  }

  leaveLoad(): void {
    if (!this.answer.admitted) return;
    this.answer.admitted = false;
    this.deps.load.leave();
  }

  resumeLoad(): boolean {
    // It held a slot when it arrived: counted again whatever the load (overload.ts readmit).
    this.deps.load.readmit();
    this.answer.admitted = true;
    return true;
  }

  afterWait(): void {
    this.token = this.tokens.peekToken() ?? this.token;
  }

  proceed(
    pacing: UpstreamPacing,
    key: string,
    rateLimit: string | undefined,
    waitedMs: number,
  ): void {
    this.answer.waitMs = waitedMs;
    exchange(this, pacing, key, rateLimit);
  }

  refuse(code: ProxyErrorCode, message: string, refusal: GateRefusal): void {
    this.answer.waitMs = refusal.waitedMs;
    this.answer.fail(code, message, refusal);
  }
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
    pace(new ReadyRequest(answer, plan, deps, tokens, cached, null), pacing);
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
    pace(new ReadyRequest(answer, plan, deps, tokens, token, body), pacing);
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

/** The pacing gate (pacing/gate.ts), consulted once per request right before the exchange. */
function pace(ready: ReadyRequest, pacing: UpstreamPacing | undefined): void {
  if (pacing === undefined) {
    exchange(ready, undefined, "", undefined);
    return;
  }
  passGate(
    ready,
    pacing,
    budgetKey(pacing, ready.answer.caller, ready.answer.req.socket),
    ready.deps.waiting,
  );
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
