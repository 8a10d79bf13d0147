/**
 * Body (plain requests): a small body (up to `replayBodyLimit`) is read whole — the 401-replay
 * copy, and a Buffer lets undici finish writing before an early answer — a large or chunked one
 * is streamed with backpressure (request-body.ts). Both under the idle timeout and the minimum
 * upload rate; a body that fails them gets 408/413, or its connection cut once answered.
 */
import type { LimitsConfig } from "../../config/proxy-config.js";
import type { ProxyErrorCode } from "../../errors.js";
import type { ProxiedRequest } from "../proxied-request.js";
import {
  type BodyReadLimits,
  ClientBodyError,
  type ClientBodyFailure,
  readBodyToBuffer,
  streamBody,
} from "../request-body.js";
import type { Flow, Stage } from "./pipeline.js";

/** What the client is told when its body fails a limit. */
const BODY_FAILURE_CODE = {
  timeout: "request_timeout",
  too_slow: "request_timeout",
  too_large: "payload_too_large",
} as const satisfies Record<Exclude<ClientBodyFailure, "aborted">, ProxyErrorCode>;

export class BodyStage implements Stage {
  readonly name = "body";

  constructor(private readonly limits: LimitsConfig) {}

  run(request: ProxiedRequest, flow: Flow): void {
    const plan = request.bodyPlan;
    if (plan.kind === "none") {
      flow.next(request);
      return;
    }
    const limits: BodyReadLimits = {
      idleMs: request.route!.config.timeouts.bodyIdleMs,
      minRate: {
        bytesPerSecond: this.limits.minRequestBodyRate,
        graceMs: this.limits.minDataRateGraceMs,
      },
      maxBytes: request.maxBodyBytes,
    };
    if (plan.kind === "stream") {
      const streamed = streamBody(request.req, limits, (err) => uploadFailed(request, err));
      request.bytesIn = streamed.bytesRead;
      request.body = streamed.stream;
      flow.next(request);
      return;
    }
    readBodyToBuffer(request.req, plan.length, limits).then(
      (buffered) => {
        request.bytesIn = () => buffered.length;
        request.body = buffered;
        flow.next(request);
      },
      (err: unknown) => bodyFailed(request, err),
    );
  }
}

function bodyFailed(request: ProxiedRequest, err: unknown): void {
  if (request.answered) return;
  if (!(err instanceof ClientBodyError)) {
    request.fail("internal_error", "internal error", { cause: err });
    return;
  }
  if (err.reason === "aborted") request.finishClientClosed();
  else request.fail(BODY_FAILURE_CODE[err.reason], err.message);
}

/**
 * A streamed upload stalled, was too slow or too large: answer (408/413) if nothing was
 * answered yet, else cut the client connection; either way the upstream request is aborted.
 */
function uploadFailed(request: ProxiedRequest, err: ClientBodyError): void {
  if (request.answered || err.reason === "aborted") return;
  if (!request.res.headersSent) {
    const exchange = request.exchange;
    request.exchange = undefined;
    request.fail(BODY_FAILURE_CODE[err.reason], err.message);
    exchange?.abortFromClient();
  } else {
    request.res.destroy();
  }
}
