/**
 * Tracing on, exporting to a real OTLP receiver on 127.0.0.1, with every log line kept.
 * `close()` shuts both down (call it in afterEach).
 */
import { expect } from "vitest";
import type { Logger } from "../../src/observability/logger.js";
import { createTracing, type Tracing, type TracingEnv } from "../../src/observability/tracing.js";
import type { OtlpProtocol } from "../../src/observability/tracing-settings.js";
import { createCapturingLogger } from "../helpers/app-under-test.js";
import {
  type CollectedSpan,
  type OtlpReceiver,
  startOtlpReceiver,
} from "../helpers/otlp-receiver.js";

export const PROTOCOLS: readonly OtlpProtocol[] = ["http/protobuf", "http/json"];

export interface TracingFixture {
  tracing: Tracing;
  receiver: OtlpReceiver;
  logger: Logger;
  /** Raw log lines as written. */
  lines: string[];
  records: Record<string, unknown>[];
  /** Flushes the tracer and returns every span received so far. */
  flushed(): Promise<CollectedSpan[]>;
  close(): Promise<void>;
}

export function capturingLogger(): Pick<TracingFixture, "logger" | "lines" | "records"> {
  return createCapturingLogger("debug");
}

export async function startTracingFixture(
  protocol: OtlpProtocol,
  env: TracingEnv = {},
): Promise<TracingFixture> {
  const receiver = await startOtlpReceiver();
  const log = capturingLogger();
  const tracing = await createTracing({
    env: {
      OTEL_TRACES_EXPORTER: "otlp",
      OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      // Nothing is exported on a timer: tests flush.
      OTEL_BSP_SCHEDULE_DELAY: "60000",
      ...env,
    },
    logger: log.logger,
    serviceVersion: "9.9.9-test",
  });
  return {
    tracing,
    receiver,
    ...log,
    async flushed() {
      await tracing.forceFlush();
      return receiver.spans;
    },
    async close() {
      await tracing.shutdown();
      await receiver.close();
    },
  };
}

/** The one span named `name` (and kind, if given); fails the test if there isn't exactly one. */
export function only(spans: readonly CollectedSpan[], name: string, kind?: string): CollectedSpan {
  const found = spans.filter((s) => s.name === name && (kind === undefined || s.kind === kind));
  if (found.length !== 1) {
    throw new Error(`expected one span ${name}, got ${found.length}: ${spans.map((s) => s.name)}`);
  }
  return found[0]!;
}

/** OTLP status code ERROR. */
export const ERROR = 2;

/** The one SERVER span, checked failed: status ERROR, `error.type`, the status code and `also`. */
export function failedServerSpan(
  spans: readonly CollectedSpan[],
  errorType: string,
  status: number,
  also: Record<string, unknown> = {},
): CollectedSpan {
  const server = only(spans, "GET", "server");
  expect(server.status.code).toBe(ERROR);
  expect(server.attributes).toMatchObject({
    "error.type": errorType,
    "http.response.status_code": status,
    ...also,
  });
  return server;
}

/** The one token wait, checked: a child of `server` that failed with `errorType`. */
export function failedTokenWait(
  spans: readonly CollectedSpan[],
  server: CollectedSpan,
  errorType: string,
): CollectedSpan {
  const wait = only(spans, "token wait", "internal");
  expect(wait.parentSpanId).toBe(server.spanId);
  expect(wait.status.code).toBe(ERROR);
  expect(wait.attributes["error.type"]).toBe(errorType);
  return wait;
}

/**
 * Every upstream attempt (each CLIENT span but the token fetches), checked: at least one, and
 * each a child of `server` that failed with `errorType` before any answer (no status code),
 * aimed at `port`.
 */
export function failedAttempts(
  spans: readonly CollectedSpan[],
  server: CollectedSpan,
  errorType: string,
  port: number,
): CollectedSpan[] {
  // One attempt, or more if the retry budget let a connect retry go. The prefetch's token
  // fetch is a CLIENT span too, of its own trace.
  const attempts = spans.filter((s) => s.kind === "client" && s.name !== "token fetch");
  expect(attempts.length).toBeGreaterThanOrEqual(1);
  for (const attempt of attempts) {
    expect(attempt.parentSpanId).toBe(server.spanId);
    expect(attempt.status.code).toBe(ERROR);
    expect(attempt.attributes["error.type"]).toBe(errorType);
    expect(attempt.attributes["http.response.status_code"]).toBeUndefined();
    expect(attempt.attributes["server.port"]).toBe(port);
  }
  return attempts;
}

/** The whole attribute set of a SERVER span the proxy answered (`status`) for `upstream`. */
export function serverSpanAttributes(options: {
  method?: string;
  path: string;
  upstream: string;
  status: number;
}): Record<string, unknown> {
  return {
    "http.request.method": options.method ?? "GET",
    "url.scheme": "http",
    "url.path": options.path,
    "network.protocol.version": "1.1",
    "bearer_proxy.upstream": options.upstream,
    "http.response.status_code": options.status,
  };
}

/** The whole attribute set of a first upstream attempt (CLIENT span) to `url` on 127.0.0.1. */
export function attemptSpanAttributes(options: {
  method?: string;
  url: string;
  upstream: string;
  status: number;
}): Record<string, unknown> {
  return {
    "http.request.method": options.method ?? "GET",
    "url.full": options.url,
    "server.address": "127.0.0.1",
    "server.port": Number(new URL(options.url).port),
    "http.response.status_code": options.status,
    "network.protocol.version": "1.1",
    "bearer_proxy.upstream": options.upstream,
  };
}

/** `00-<trace id>-<span id>-<flags>` split up. */
export function parseTraceparent(value: string | undefined): {
  traceId: string;
  spanId: string;
  flags: string;
} {
  const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(value ?? "");
  if (!match) throw new Error(`not a traceparent: ${value}`);
  return { traceId: match[1]!, spanId: match[2]!, flags: match[3]! };
}
