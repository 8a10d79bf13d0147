/**
 * The way in of plain requests (the listener's 'request' event): each connection's requests in
 * the order they came (connection-queue.ts), the process's load bound (`limits.maxInFlight`:
 * past it a fast 503 `overloaded`), then the pipeline — guard → route → caller gate → token →
 * body → pacing turn → exchange.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { CallerGate } from "../callers/caller-gate.js";
import type { LimitsConfig, PathsConfig } from "../config/proxy-config.js";
import type { Lifecycle } from "../lifecycle.js";
import type { Logger } from "../observability/logger.js";
import { NOOP_TRACING, type Tracing } from "../observability/tracing.js";
import { createConnectionQueue } from "./connection-queue.js";
import { BodyStage } from "./pipeline/body-stage.js";
import { CallerStage } from "./pipeline/caller-stage.js";
import { ExchangeStage } from "./pipeline/exchange-stage.js";
import { GuardStage } from "./pipeline/guard-stage.js";
import { PacingStage } from "./pipeline/pacing-stage.js";
import { Pipeline, type Stage } from "./pipeline/pipeline.js";
import { RouteStage } from "./pipeline/route-stage.js";
import { TokenStage } from "./pipeline/token-stage.js";
import { ProxiedRequest, type RequestContext } from "./proxied-request.js";
import type { RequestRecorder } from "./request-log.js";
import type { RouteTable } from "./routing/route-table.js";

/** What every way in of one routing generation shares. */
export interface EntryDeps {
  limits: LimitsConfig;
  /** How request paths are normalized at the door (request-guards.ts). */
  paths: PathsConfig;
  routes: RouteTable;
  /** Who may use which upstream; undefined: everyone (no `allow` anywhere). */
  callerGate?: CallerGate | undefined;
  /** Spans per request and upstream attempt; default: off. */
  tracing?: Tracing | undefined;
  logger: Logger;
  /** The access line and metrics of every finished request (request-log.ts). */
  recordRequest: RequestRecorder;
  lifecycle: Lifecycle;
}

export interface RequestEntry {
  (req: IncomingMessage, res: ServerResponse): void;
  /** Requests currently being handled. */
  inFlight(): number;
  /** From now on every response carries `Connection: close`. */
  markClosing(): void;
}

/** The stages from the caller gate on, shared by plain requests and upgrades. */
export function stagesAfterRoute(deps: EntryDeps): Stage[] {
  const stages: Stage[] = [];
  if (deps.callerGate !== undefined) stages.push(new CallerStage(deps.callerGate));
  stages.push(new TokenStage());
  return stages;
}

const kRequest = Symbol("bearer-proxy.request");
type AnsweredBy = ServerResponse & { [kRequest]?: ProxiedRequest };

/** A response closed before it finished: its client hung up. */
function onResponseClose(this: AnsweredBy): void {
  if (!this.writableFinished) this[kRequest]?.clientClosed();
}

export function createRequestEntry(deps: EntryDeps): RequestEntry {
  const { lifecycle, limits } = deps;
  const tracing = deps.tracing ?? NOOP_TRACING;
  const pipeline = new Pipeline(
    [
      new GuardStage(limits, deps.paths, deps.routes),
      new RouteStage(limits, deps.routes),
      ...stagesAfterRoute(deps),
      new BodyStage(limits),
      new PacingStage({ room: lifecycle.waiting, limits }),
      new ExchangeStage(limits, tracing.enabled),
    ],
    deps.logger,
  );
  let inFlight = 0;
  let closing = false;
  const queue = createConnectionQueue(handle, limits.maxPipelinedRequests);
  const context: RequestContext = {
    recordRequest: deps.recordRequest,
    tracing,
    closingAll: () => closing || lifecycle.phase === "draining",
    onFinished(request) {
      inFlight--;
      if (request.admitted) lifecycle.load.leave();
      queue.next(request.req);
    },
    leaveLoad(request) {
      if (!request.admitted) return;
      request.admitted = false;
      lifecycle.load.leave();
    },
    resumeLoad(request) {
      // It held a slot when it arrived: counted again whatever the load (base/process-load.ts readmit).
      lifecycle.load.readmit();
      request.admitted = true;
      return true;
    },
  };

  function handle(req: IncomingMessage, res: ServerResponse): void {
    const request = new ProxiedRequest("request", req, res, context);
    // The SERVER span starts with the request, so its duration is the client's.
    void request.span;
    // `on`, not `once`: a response closes once, and `once` costs a wrapper per request; one
    // shared listener finds its request on the response rather than a closure per request.
    (res as AnsweredBy)[kRequest] = request;
    res.on("close", onResponseClose);
    inFlight++;
    request.admitted = lifecycle.load.tryEnter(limits.maxInFlight);
    if (!request.admitted) {
      request.fail("overloaded", "the proxy is handling limits.maxInFlight requests already", {
        retryAfterSeconds: 1,
      });
      return;
    }
    pipeline.start(request);
  }

  const entry = ((req: IncomingMessage, res: ServerResponse) =>
    queue.enqueue(req, res)) as RequestEntry;
  entry.inFlight = () => inFlight;
  entry.markClosing = () => {
    closing = true;
  };
  return entry;
}
