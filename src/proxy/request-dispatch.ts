/**
 * Dispatching a planned request: get the token (cached, or wait for one), read or stream the
 * body, then start the exchange with the upstream. The fast path (a token cached, no body)
 * stays synchronous from the request event to `dispatch`.
 */
import type { Readable } from "node:stream";
import type { Dispatcher } from "undici";
import type { AccessToken, TokenProvider } from "../token/types.js";
import { startExchange } from "./forward.js";
import { mapUpstreamError } from "./proxy-errors.js";
import type { RequestAnswer } from "./request-answer.js";
import { ClientBodyError, readBodyToBuffer, streamBody } from "./request-body.js";
import type { ForwardPlan } from "./request-plan.js";

export interface DispatchDeps {
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
      token = await tokens.getToken(answer.abortWait.signal);
    }
    if (answer.finished) return;
    let body: Buffer | Readable | null = null;
    if (plan.body.kind === "buffer") {
      const buffered = await readBodyToBuffer(req, plan.body.length, upstream.timeouts.bodyIdleMs);
      answer.bytesIn = () => buffered.length;
      body = buffered;
    } else if (plan.body.kind === "stream") {
      const streamed = streamBody(req, upstream.timeouts.bodyIdleMs, (err) => {
        if (err.reason === "timeout") uploadStalled(answer);
      });
      answer.bytesIn = streamed.bytesRead;
      body = streamed.stream;
    }
    if (answer.finished) return;
    exchange(answer, plan, deps, tokens, token, body);
  } catch (err) {
    if (answer.finished) return;
    if (err instanceof ClientBodyError) {
      if (err.reason === "timeout") answer.fail("request_timeout", "request body stalled");
      else answer.finishClientClosed();
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
    authorization: route.injector.authorization,
    token,
    body,
    closeConnection: answer.closeConnection,
    onDone: (outcome) => {
      answer.abortExchange = undefined;
      answer.finish(outcome);
    },
  });
  if (!answer.finished) answer.abortExchange = () => running.abortFromClient();
}

/** A streamed upload stalled: answer 408 if we still can, and stop the upstream request. */
function uploadStalled(answer: RequestAnswer): void {
  if (answer.finished) return;
  if (!answer.res.headersSent) {
    const abort = answer.abortExchange;
    answer.abortExchange = undefined;
    answer.fail("request_timeout", "request body stalled");
    abort?.();
  } else {
    answer.res.destroy();
  }
}
