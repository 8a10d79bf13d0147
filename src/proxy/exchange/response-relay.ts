/**
 * The innermost layer of an exchange: the upstream's answer written to the client with
 * backpressure both ways — the upstream paused while the client's buffer is full, a client that
 * reads slower than `limits.minResponseRate` cut off — with the framing rules of
 * response-framing.ts (issue 15), 103 Early Hints to HTTP/1.1 clients, trailers when the
 * client's response is chunked, and the `RateLimit` fields of the request's admission. An
 * Upgrade request's 101 is handed to its tunnel (`onSwitchingProtocols`).
 */
import type { Duplex } from "node:stream";
import type { LimitsConfig } from "../../config/proxy-config.js";
import type { RawHeaders } from "../../net/raw-headers.js";
import { mapUpstreamError } from "../proxy-errors.js";
import {
  clientGetsChunked,
  earlyHints,
  responseFraming,
  responseHasBody,
  trailerPairs,
  withoutField,
} from "../response-framing.js";
import { clientResponseHeaders } from "../response-headers.js";
import type { Exchange } from "./exchange.js";
import type { AttemptHandler } from "./layer.js";

/** Receives an upgrade's 101: its raw header list and the upstream connection. */
export type SwitchingProtocols = (
  statusCode: number,
  rawHeaders: RawHeaders,
  socket: Duplex,
) => void;

export class ResponseRelay implements AttemptHandler {
  /** Response body bytes written to the client. */
  bytesOut = 0;
  /** undici's resume for the current attempt; called on the client's drain. */
  private resumeUpstream: (() => void) | undefined;
  /** Set while the client's buffer is full and a drain listener is waiting. */
  private waitingForDrain = false;
  /** Set when the client must take its full buffer before this fires (minResponseRate). */
  private drainTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly exchange: Exchange,
    private readonly limits: Pick<LimitsConfig, "minResponseRate" | "minDataRateGraceMs">,
    private readonly onSwitchingProtocols?: SwitchingProtocols,
  ) {}

  onHeaders(statusCode: number, rawHeaders: RawHeaders, resume: () => void): boolean {
    this.resumeUpstream = resume;
    // Interim responses: undici reports the final response after them (issue 15 item 7).
    if (statusCode < 200) {
      if (statusCode === 103) this.relayEarlyHints(rawHeaders);
      return true;
    }
    this.writeHead(statusCode, rawHeaders);
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.exchange.finished) return true;
    const { res } = this.exchange.request;
    this.bytesOut += chunk.length;
    if (res.write(chunk)) return true;
    this.waitForDrain();
    return false;
  }

  onComplete(trailers: RawHeaders | null): void {
    if (this.exchange.finished) return;
    const { res } = this.exchange.request;
    this.relayTrailers(trailers);
    res.end();
    this.exchange.finish({ status: res.statusCode, errorCode: undefined, cause: undefined });
  }

  onError(err: Error): void {
    const { exchange } = this;
    if (exchange.finished) return;
    if (this.bodilessLengthMismatch(err)) {
      exchange.request.res.end();
      exchange.finish({
        status: exchange.request.res.statusCode,
        errorCode: undefined,
        cause: undefined,
      });
      return;
    }
    const upstream = exchange.route.config;
    exchange.fail(mapUpstreamError(err, upstream.name, upstream.maxResponseHeaderSizeBytes));
  }

  onUpgrade(statusCode: number, rawHeaders: RawHeaders, socket: Duplex): void {
    if (this.onSwitchingProtocols === undefined) {
      // undici calls it only for a request sent with `upgrade`.
      socket.destroy();
      return;
    }
    this.exchange.handOff();
    this.onSwitchingProtocols(statusCode, rawHeaders, socket);
  }

  /** Stops waiting on the client (the exchange ended). */
  stop(): void {
    clearTimeout(this.drainTimer);
  }

  private writeHead(statusCode: number, raw: RawHeaders): void {
    const { exchange } = this;
    const { req, res, method } = exchange.request;
    try {
      // Issue 15 items 2 and 6: see response-framing.ts.
      let headers = clientResponseHeaders(raw, exchange.request.closeConnection());
      // draft-ietf-httpapi-ratelimit-headers: what the client's budget looks like after this one.
      const policy = exchange.route.pacing?.policy;
      const rateLimit = exchange.request.rateLimit;
      if (policy !== undefined && rateLimit !== undefined) {
        headers.push("ratelimit-policy", policy, "ratelimit", rateLimit);
      }
      const framing = responseFraming(headers);
      const hasBody = responseHasBody(method, statusCode);
      if (framing.announcesTrailers && !(hasBody && clientGetsChunked(req, framing))) {
        headers = withoutField(headers, "trailer");
      }
      res.writeHead(statusCode, headers);
      if (hasBody && (!framing.hasContentLength || framing.eventStream)) res.flushHeaders();
    } catch (err) {
      // A header Node refuses to write (invalid characters): treat as a bad upstream answer.
      // Answered first: the abort calls onError at once, which must find the exchange over.
      exchange.fail({
        code: "upstream_error",
        message: `upstream ${exchange.route.name} sent a response header that can't be relayed`,
        cause: err,
      });
      exchange.abortAttempt(err as Error);
    }
  }

  /** The client's buffer is full: resume the upstream once it drains (one listener at a time). */
  private waitForDrain(): void {
    if (this.waitingForDrain) return;
    this.waitingForDrain = true;
    const { res } = this.exchange.request;
    const { minResponseRate, minDataRateGraceMs } = this.limits;
    if (minResponseRate > 0) {
      // Kestrel's MinResponseDataRate: the buffered bytes must go within their time at the
      // minimum rate (at least the grace). undici's body timeout doesn't run while paused, so
      // without this a client that stops reading holds the upstream connection forever.
      const deadlineMs = Math.max(
        minDataRateGraceMs,
        (res.writableLength / minResponseRate) * 1000,
      );
      this.drainTimer = setTimeout(() => this.clientTooSlow(), deadlineMs);
    }
    res.once("drain", () => {
      clearTimeout(this.drainTimer);
      this.waitingForDrain = false;
      this.resumeUpstream?.();
    });
  }

  /** The client reads slower than limits.minResponseRate: cut it off and free the upstream. */
  private clientTooSlow(): void {
    const { exchange } = this;
    if (exchange.finished) return;
    const { res } = exchange.request;
    exchange.finish({ status: res.statusCode, errorCode: "client_too_slow", cause: undefined });
    exchange.abortAttempt(new Error("client reads too slowly"));
    res.destroy();
  }

  /**
   * undici 7 raises a length mismatch for a 304 or 204 that carries Content-Length (RFC 9110
   * §8.6 lets a 304 announce the length of the representation it stands for): the response
   * is complete, so the client's is ended normally.
   */
  private bodilessLengthMismatch(err: Error): boolean {
    const { res } = this.exchange.request;
    const status = res.statusCode;
    return (
      res.headersSent &&
      (status === 304 || status === 204) &&
      (err as { code?: unknown }).code === "UND_ERR_RES_CONTENT_LENGTH_MISMATCH"
    );
  }

  /** 103 Early Hints to HTTP/1.1 clients only (RFC 9110 §15.2: never 1xx to HTTP/1.0). */
  private relayEarlyHints(raw: RawHeaders): void {
    const { req, res } = this.exchange.request;
    if (res.headersSent || req.httpVersionMajor !== 1 || req.httpVersionMinor < 1) return;
    const hints = earlyHints(raw);
    if (!hints) return;
    try {
      res.writeEarlyHints(hints);
    } catch {
      // A Link value Node refuses: the hints are optional, the final response is not.
    }
  }

  /** Upstream trailers, when the client's response is chunked (see response-framing.ts). */
  private relayTrailers(trailers: RawHeaders | null): void {
    const { res } = this.exchange.request;
    if (!trailers || trailers.length === 0 || !res.chunkedEncoding) return;
    try {
      res.addTrailers(trailerPairs(trailers));
    } catch {
      // A field Node refuses: the body is complete without it.
    }
  }
}
