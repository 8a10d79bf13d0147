/**
 * The proxy listener's request handler, wiring the steps together: the connection's pipeline
 * queue (pipeline-queue.ts) → planning (request-plan.ts: guards, route, headers) → dispatching
 * (request-dispatch.ts: token, body, exchange) → answering (request-answer.ts: the proxy's own
 * answers, one log line and the metrics).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Dispatcher } from "undici";
import type { CallerGate, GateVerdict } from "../callers/caller-gate.js";
import type { LimitsConfig, PathsConfig, UpstreamConfig } from "../config/types.js";
import type { Lifecycle } from "../lifecycle.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import { NOOP_TRACING, type Tracing } from "../observability/tracing.js";
import type { TokenProvider } from "../token/types.js";
import type { AccessLog } from "./access-log.js";
import type { UpstreamPacing } from "./pacing/upstream-pacing.js";
import { createPipelineQueue } from "./pipeline-queue.js";
import { type AnswerContext, RequestAnswer } from "./request-answer.js";
import { type DispatchDeps, dispatchRequest } from "./request-dispatch.js";
import { createRequestRecorder } from "./request-log.js";
import { createRequestPlanner, type ForwardPlan } from "./request-plan.js";

export interface RequestHandlerDeps {
  limits: LimitsConfig;
  /** How request paths are normalized before routing (request-guards.ts). */
  paths: PathsConfig;
  /** The upstreams served on this listener. */
  upstreams: readonly UpstreamConfig[];
  /** Called per request (cheap lookups expected): the registry may evict idle sources. */
  tokenFor(upstreamName: string): TokenProvider;
  dispatcherFor(upstreamName: string): Dispatcher;
  /** A dispatcher that keeps no idle connections, for the one retry after a reset. */
  freshDispatcherFor?: ((upstreamName: string) => Dispatcher) | undefined;
  /** Who may use which upstream; undefined: everyone (no `allow` anywhere). */
  callerGate?: CallerGate | undefined;
  /** Each upstream's pacing gate and retry policy (issue 26); undefined: neither. */
  pacingFor?: ((upstreamName: string) => UpstreamPacing | undefined) | undefined;
  /** Spans per request and upstream attempt; default: off. */
  tracing?: Tracing | undefined;
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

export function createRequestHandler(deps: RequestHandlerDeps): RequestHandler {
  const { lifecycle } = deps;
  const planner = createRequestPlanner(deps.limits, deps.paths, deps.upstreams, {
    dropTraceContext: deps.tracing?.enabled,
  });
  let inFlight = 0;
  let closing = false;
  // What dispatching needs besides these deps: the load a waiting request leaves, and the room.
  const dispatchDeps: DispatchDeps = {
    ...deps,
    load: lifecycle.load,
    waiting: { room: lifecycle.waiting, limits: deps.limits },
  };

  const pipeline = createPipelineQueue(handle, deps.limits.maxPipelinedRequests);
  const context: AnswerContext = {
    recordRequest: createRequestRecorder(deps.metrics, deps.accessLog),
    tracing: deps.tracing ?? NOOP_TRACING,
    closingAll: () => closing || lifecycle.phase === "draining",
    onFinished(answer) {
      inFlight--;
      if (answer.admitted) lifecycle.load.leave();
      pipeline.next(answer.req);
    },
  };

  function handle(req: IncomingMessage, res: ServerResponse): void {
    const answer = new RequestAnswer(req, res, context);
    inFlight++;
    answer.admitted = lifecycle.load.tryEnter(deps.limits.maxInFlight);
    if (!answer.admitted) {
      answer.fail("overloaded", "the proxy is handling limits.maxInFlight requests already", {
        retryAfterSeconds: 1,
      });
      return;
    }
    try {
      const plan = planner.plan(req);
      answer.pathname = plan.pathname;
      if (plan.route) answer.markRouted(plan.route.config.name);
      if (plan.kind === "reject") {
        answer.fail(plan.code, plan.message, { headers: plan.headers, close: plan.close });
        return;
      }
      const verdict = deps.callerGate?.check(plan.route.config.name, req);
      if (verdict === undefined) dispatchRequest(answer, plan, dispatchDeps);
      else if (verdict instanceof Promise) {
        // A credential not seen lately: bcrypt or a JWKS lookup runs first.
        void verdict.then((settled) => admit(answer, plan, settled));
      } else admit(answer, plan, verdict);
    } catch (err) {
      // A bug or a failing dependency (token registry, dispatcher lookup) must cost one request,
      // never the process: an exception here would otherwise escape into Node's parser.
      deps.logger.error({ err, upstream: answer.upstreamName }, "request handler failed");
      answer.fail("internal_error", "internal error", { cause: err, close: true });
    }
  }

  /** Forward the request its caller may send; answer the one it may not (the upstream sees nothing). */
  function admit(answer: RequestAnswer, plan: ForwardPlan, verdict: GateVerdict): void {
    if (answer.finished) return; // the client left while its credential was checked
    answer.caller = verdict.caller;
    if (verdict.allowed) {
      dispatchRequest(answer, plan, dispatchDeps);
      return;
    }
    answer.fail(verdict.code, verdict.message, {
      headers: verdict.headers,
      retryAfterSeconds: verdict.retryAfterSeconds,
    });
  }

  const handler = ((req: IncomingMessage, res: ServerResponse) =>
    pipeline.enqueue(req, res)) as RequestHandler;
  handler.inFlight = () => inFlight;
  handler.markClosing = () => {
    closing = true;
  };
  return handler;
}
