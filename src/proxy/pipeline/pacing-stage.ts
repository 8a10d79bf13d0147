/**
 * Pacing turn: the upstream's pacer (pacing/gate.ts), consulted once per request right before
 * the exchange — a free turn goes on at once, a request over the limit waits for its turn within
 * `rateLimit.wait` (or an upstream's pause), one whose turn would come later is refused 429 with
 * Retry-After and the RateLimit fields. An Upgrade handshake takes its turn the same way: the
 * upstream counts it like any request. The exchange's resends take theirs (pacing-layer.ts).
 */
import type { ProxyErrorCode } from "../../errors.js";
import {
  admitted,
  budgetKey,
  type GateRefusal,
  type PacedRequest,
  passGate,
  type WaitingPlaces,
} from "../../pacing/gate.js";
import type { UpstreamPacing } from "../../pacing/upstream-pacing.js";
import type { ProxiedRequest } from "../proxied-request.js";
import type { Flow, Stage } from "./pipeline.js";

export class PacingStage implements Stage {
  readonly name = "pacing turn";

  /** `waiting`: where a request the pacer must hold waits, out of its load (`limits.maxWaiting`). */
  constructor(private readonly waiting: WaitingPlaces) {}

  run(request: ProxiedRequest, flow: Flow): void {
    const pacing = request.route!.pacing;
    if (pacing === undefined) {
      flow.next(request);
      return;
    }
    const key = budgetKey(pacing, request.caller, request.req.socket);
    // A turn free at once (the usual case): no pass through the gate, nothing made for a wait.
    const now = pacing.pacer.admitNow?.(key);
    if (now?.ok) {
      throughTheGate(request, flow, key, admitted(pacing, now), now.waitedMs);
      return;
    }
    passGate(new AtTheGate(request, flow), pacing, key, this.waiting);
  }
}

/** Through the gate, at once or after a wait: the request spends budget `key` and goes on. */
function throughTheGate(
  request: ProxiedRequest,
  flow: Flow,
  key: string,
  rateLimit: string | undefined,
  waitedMs: number,
): void {
  request.waitMs = waitedMs;
  request.paceKey = key;
  request.rateLimit = rateLimit;
  flow.next(request);
}

/** A request as the gate sees it, made only for an upstream with pacing. */
class AtTheGate implements PacedRequest {
  constructor(
    private readonly request: ProxiedRequest,
    private readonly flow: Flow,
  ) {}

  get finished(): boolean {
    return this.request.answered;
  }

  get caller(): string | undefined {
    return this.request.caller;
  }

  get peer() {
    return this.request.req.socket;
  }

  leaveLoad(): void {
    this.request.leaveLoad();
  }

  resumeLoad(): boolean {
    return this.request.resumeLoad();
  }

  waitSignal(): AbortSignal {
    this.request.abortWait ??= new AbortController();
    return this.request.abortWait.signal;
  }

  afterWait(): void {
    // A long wait may have outlived the token in hand.
    const { request } = this;
    request.token = request.route!.tokens().peekToken() ?? request.token;
  }

  proceed(
    _pacing: UpstreamPacing,
    key: string,
    rateLimit: string | undefined,
    waitedMs: number,
  ): void {
    throughTheGate(this.request, this.flow, key, rateLimit, waitedMs);
  }

  refuse(code: ProxyErrorCode, message: string, refusal: GateRefusal): void {
    this.request.waitMs = refusal.waitedMs;
    this.request.fail(code, message, refusal);
  }
}
