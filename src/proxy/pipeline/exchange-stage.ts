/**
 * Exchange: the request goes upstream, with the layers its upstream and body call for (see
 * exchange/exchange.ts): the pacing layer only with pacing, the token replay only for a body
 * that can be sent again (or a DPoP token, whose nonces it keeps). With tracing on, each attempt
 * gets its CLIENT span and `traceparent` (exchange/attempt-spans.ts) beside the layers, not among
 * them, recorded or not. A plain request's exchange ends in the relayed answer; an upgrade's may
 * end in a 101 handed to its tunnel (`onSwitchingProtocols`), any other answer relayed as a
 * plain one.
 *
 * Without DPoP, the pacing, retry and token-replay layers wait until an attempt needs them
 * (exchange.ts `headFor`: a 401, a 429, a 502–504, an error): a successful exchange then costs
 * two objects, the exchange and its relay (and with tracing its attempt spans), instead of five.
 * Every upstream has pacing (an upstream's Retry-After pauses it even without a `rateLimit`), so
 * building them up front would put them on every request's path.
 */
import type { LimitsConfig } from "../../config/proxy-config.js";
import { AttemptSpanRecorder } from "../exchange/attempt-spans.js";
import { type BuiltRecoveries, Exchange, type RecoveryLayers } from "../exchange/exchange.js";
import type { AttemptHandler } from "../exchange/layer.js";
import { PacingLayer } from "../exchange/pacing-layer.js";
import { ResponseRelay, type SwitchingProtocols } from "../exchange/response-relay.js";
import { RetryLayer } from "../exchange/retry-layer.js";
import { TokenReplayLayer } from "../exchange/token-replay-layer.js";
import type { ProxiedRequest } from "../proxied-request.js";
import type { Flow, Stage } from "./pipeline.js";

export class ExchangeStage implements Stage, RecoveryLayers {
  readonly name = "exchange";

  constructor(
    private readonly limits: Pick<LimitsConfig, "minResponseRate" | "minDataRateGraceMs">,
    private readonly tracing: boolean,
    /** An upgrade's 101 (undefined: plain requests, whose exchange never upgrades). */
    private readonly onSwitchingProtocols?: (request: ProxiedRequest) => SwitchingProtocols,
  ) {}

  run(request: ProxiedRequest, _flow: Flow): void {
    const upgrade = this.onSwitchingProtocols === undefined ? undefined : request.upgradeProtocols;
    const exchange = new Exchange(request, upgrade);
    const relay = new ResponseRelay(exchange, this.limits, this.onSwitchingProtocols?.(request));
    const span = this.tracing
      ? new AttemptSpanRecorder(request.span, exchange.route, request.method, request.upstreamPath)
      : undefined;
    if (request.slots.dpopIndex < 0) {
      exchange.start({
        head: relay,
        span,
        pacing: undefined,
        retry: undefined,
        relay,
        recoveries: this,
      });
      return;
    }
    // Every answer may carry the origin's next DPoP-Nonce: the token layer sees all of them.
    exchange.start({
      ...this.buildRecoveries(exchange, relay),
      span,
      relay,
      recoveries: undefined,
    });
  }

  /**
   * Retry around `inner`, token replay around that for a body that can be sent again (or a
   * DPoP token), and the pacing layer outermost when the upstream has pacing: it must see a
   * Retry-After before the retry layer decides (a paused upstream's 503 is not retried).
   */
  buildRecoveries(exchange: Exchange, inner: AttemptHandler): BuiltRecoveries {
    const retry = new RetryLayer(inner, exchange);
    let head: AttemptHandler =
      exchange.replayable || exchange.request.slots.dpopIndex >= 0
        ? new TokenReplayLayer(retry, exchange)
        : retry;
    const pacingConfig = exchange.route.pacing;
    const pacing =
      pacingConfig === undefined ? undefined : new PacingLayer(head, pacingConfig, exchange);
    if (pacing !== undefined) head = pacing;
    return { head, retry, pacing };
  }
}
