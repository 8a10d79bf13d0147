/**
 * Exchange: the request goes upstream, with the layers its upstream and body call for (see
 * exchange/exchange.ts): a span layer only for a recorded request (one the sampler left out
 * only has its `traceparent` written per attempt), the pacing layer only with pacing, the
 * token replay only for a body that can be sent again (or a DPoP token, whose nonces it keeps).
 * A plain request's exchange ends in the relayed answer; an upgrade's may end in a 101 handed to
 * its tunnel (`onSwitchingProtocols`), any other answer relayed as a plain one.
 *
 * With no recorded span, no pacing and no DPoP, the retry and token-replay layers wait until an
 * attempt needs them (exchange.ts `headFor`): a successful exchange then costs two objects, the
 * exchange and its relay (and a request left out by the sampler its span layer), instead of four.
 */
import type { LimitsConfig } from "../../config/proxy-config.js";
import { Exchange, type RecoveryLayers } from "../exchange/exchange.js";
import type { AttemptHandler } from "../exchange/layer.js";
import { PacingLayer } from "../exchange/pacing-layer.js";
import { ResponseRelay, type SwitchingProtocols } from "../exchange/response-relay.js";
import { RetryLayer } from "../exchange/retry-layer.js";
import { SpanLayer } from "../exchange/span-layer.js";
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
    const pacingConfig = exchange.route.pacing;
    const dpop = request.slots.dpopIndex >= 0;
    // A request the sampler left out records nothing: its span layer only writes each
    // attempt's `traceparent` (beginAttempt), so it stays out of the callbacks' path.
    const recorded = this.tracing && request.span.recorded;
    if (!recorded && pacingConfig === undefined && !dpop) {
      exchange.start({
        head: relay,
        span: this.tracing ? this.spanLayer(relay, request, exchange) : undefined,
        pacing: undefined,
        retry: undefined,
        relay,
        recoveries: this,
      });
      return;
    }
    // Each of these acts on every attempt (a span, a Retry-After, a DPoP-Nonce): all built now.
    const recoveries = this.buildRecoveries(exchange, relay);
    let head = recoveries.head;
    const pacing =
      pacingConfig === undefined ? undefined : new PacingLayer(head, pacingConfig, exchange);
    if (pacing !== undefined) head = pacing;
    const span = this.tracing ? this.spanLayer(head, request, exchange) : undefined;
    if (recorded && span !== undefined) head = span;
    exchange.start({ head, span, pacing, retry: recoveries.retry, relay, recoveries: undefined });
  }

  private spanLayer(next: AttemptHandler, request: ProxiedRequest, exchange: Exchange): SpanLayer {
    return new SpanLayer(next, request.span, exchange.route, request.method, request.upstreamPath);
  }

  /** Retry around `inner`, and token replay around that for a body that can be sent again. */
  buildRecoveries(
    exchange: Exchange,
    inner: AttemptHandler,
  ): { head: AttemptHandler; retry: RetryLayer } {
    const retry = new RetryLayer(inner, exchange);
    const head =
      exchange.replayable || exchange.request.slots.dpopIndex >= 0
        ? new TokenReplayLayer(retry, exchange)
        : retry;
    return { head, retry };
  }
}
