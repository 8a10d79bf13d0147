/**
 * The driver of the request pipeline: a request passes the stages in order — guard → route →
 * caller gate → token → (body) → pacing turn → exchange — each a small object with one job that
 * passes the request on or answers it (fastify's hooks, Envoy's filter chain: the chain knows
 * the order, a stage only its own job). A stage that has to wait (a bcrypt check, a token, a
 * turn) passes the request on when its wait ends; nothing else changes for the stages after it.
 *
 * The fast path (a cached caller, a cached token, no body, a free turn) runs every stage
 * synchronously from the request event to undici's `dispatch`: no promise, no timer, and no
 * closure per stage (the request carries its position).
 */
import type { Logger } from "../../observability/logger.js";
import type { ProxiedRequest } from "../proxied-request.js";

/** What a stage may do with a request besides answering it. */
export interface Flow {
  /** The stage is done with `request`: the next one takes it (now, on this stack). */
  next(request: ProxiedRequest): void;
}

export interface Stage {
  /** Names the stage in logs and tests. */
  readonly name: string;
  /**
   * Does the stage's work, then calls `flow.next(request)` — at once, or when its wait ends —
   * or answers the request through its boundary (`request.fail`) and stops.
   */
  run(request: ProxiedRequest, flow: Flow): void;
}

export class Pipeline implements Flow {
  constructor(
    readonly stages: readonly Stage[],
    private readonly logger: Logger,
  ) {}

  /** Runs `request` through every stage from the first. */
  start(request: ProxiedRequest): void {
    request.stageIndex = 0;
    this.run(request, 0);
  }

  next(request: ProxiedRequest): void {
    const index = request.stageIndex + 1;
    request.stageIndex = index;
    this.run(request, index);
  }

  private run(request: ProxiedRequest, index: number): void {
    if (request.answered) return; // the client left while the last stage waited
    const stage = this.stages[index];
    if (stage === undefined) return;
    try {
      stage.run(request, this);
    } catch (err) {
      // A bug or a failing dependency (token registry, dispatcher) must cost one request,
      // never the process: thrown here it would reach Node's parser or a promise unheard.
      this.logger.error(
        { err, upstream: request.upstreamName, stage: stage.name },
        "request pipeline failed",
      );
      request.fail("internal_error", "internal error", { cause: err, close: true });
    }
  }
}
