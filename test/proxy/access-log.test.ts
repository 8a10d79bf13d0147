import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createLogger } from "../../src/observability/logger.js";
import {
  type AccessLine,
  createAccessLog,
  createCachedIsoTime,
  createLineBatcher,
} from "../../src/proxy/access-log.js";

/** The access line: same text as `logger.info(line, "request")`, just cheaper to produce. */
describe("access log", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  const line = (overrides: Partial<AccessLine> = {}): AccessLine => ({
    upstream: "api",
    method: "GET",
    path: "/v1/x",
    status: 200,
    durationMs: 1.234,
    bytesIn: 0,
    bytesOut: 92,
    replayed: false,
    errorCode: undefined,
    cause: undefined,
    ...overrides,
  });

  const capture = (level = "info") => {
    const lines: string[] = [];
    const logger = createLogger({
      level,
      format: "json",
      destination: { write: (chunk: string) => lines.push(chunk) },
    });
    return { logger, lines };
  };

  /** Replaces the time value, the one field two calls can't share. */
  const withoutTime = (text: string) => text.replace(/"time":"[^"]+"/, '"time":"T"');

  it.each([
    ["a plain GET", line()],
    [
      "escapes, a replay, an error code and a cause",
      line({
        method: "OTHER",
        path: '/a"b\\c\u0001\u2028é…',
        status: 502,
        durationMs: 0.001,
        bytesIn: 65_536,
        replayed: true,
        errorCode: "upstream_reset",
        cause: { codes: ["ECONNRESET", "UND_ERR_SOCKET"], message: 'other side closed "x"' },
      }),
    ],
    ["a non-finite number (pino writes null)", line({ durationMs: Number.NaN })],
  ])("%s is written byte for byte as pino writes it", (_name, record) => {
    const { logger, lines } = capture();
    const log = createAccessLog(logger);
    expect(log.templated).toBe(true);
    log.write(record);
    logger.child({}, { redact: [] }).info(record, "request");
    expect(lines).toHaveLength(2);
    expect(withoutTime(lines[0]!)).toBe(withoutTime(lines[1]!));
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: "info", service: "bearer-proxy" });
  });

  it("keeps the logger's ISO timestamp format", () => {
    const { logger, lines } = capture();
    createAccessLog(logger).write(line());
    const time = JSON.parse(lines[0]!).time as string;
    expect(new Date(time).toISOString()).toBe(time);
  });

  it("follows the logger's level, also when it changes later", () => {
    const { logger, lines } = capture("warn");
    const log = createAccessLog(logger);
    expect(log.enabled()).toBe(false);
    logger.level = "info";
    expect(log.enabled()).toBe(true);
    log.write(line());
    expect(lines).toHaveLength(1);
  });

  it("falls back to pino when the logger's format can't be templated (a mixin)", () => {
    const lines: string[] = [];
    let n = 0;
    const logger = pino(
      { mixin: () => ({ seq: ++n }) },
      { write: (chunk: string) => lines.push(chunk) },
    );
    const log = createAccessLog(logger);
    expect(log.templated).toBe(false);
    log.write(line());
    log.write(line());
    expect(lines.map((l) => JSON.parse(l).seq)).toEqual([1, 2]);
  });

  it("falls back when a formatter derives fields from the record", () => {
    const lines: string[] = [];
    const logger = pino(
      {
        formatters: {
          log: (o: Record<string, unknown>) => ({ ...o, lower: String(o.method).toLowerCase() }),
        },
      },
      { write: (chunk: string) => lines.push(chunk) },
    );
    const log = createAccessLog(logger);
    expect(log.templated).toBe(false);
    log.write(line({ method: "PUT" }));
    expect(JSON.parse(lines[0]!)).toMatchObject({ upstream: "api", lower: "put" });
  });

  it("leaves the base logger's redaction alone", () => {
    const { logger, lines } = capture();
    createAccessLog(logger);
    logger.info({ headers: { authorization: "Bearer secret-token" } }, "other");
    expect(lines[0]).not.toContain("secret-token");
  });

  it("batched: one write per batch of whole lines, after flushMs or on flush()", () => {
    vi.useFakeTimers();
    const { logger, lines } = capture();
    const log = createAccessLog(logger, { batch: { flushMs: 100 } });
    log.write(line({ path: "/1" }));
    log.write(line({ path: "/2" }));
    expect(lines).toHaveLength(0);
    vi.advanceTimersByTime(100);
    expect(lines).toHaveLength(1);
    expect(
      lines[0]!
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l).path),
    ).toEqual(["/1", "/2"]);
    log.write(line({ path: "/3" }));
    log.flush();
    expect(lines).toHaveLength(2);
    expect(JSON.parse(lines[1]!).path).toBe("/3");
  });

  it("batcher: writes as soon as maxChars are pending", () => {
    vi.useFakeTimers();
    const written: string[] = [];
    const batcher = createLineBatcher({ write: (c) => written.push(c) }, { maxChars: 10 });
    batcher.write("12345\n");
    expect(written).toEqual([]);
    batcher.write("67890\n");
    expect(written).toEqual(["12345\n67890\n"]);
    let flushed = false;
    batcher.flush(() => {
      flushed = true;
    });
    expect(flushed).toBe(true);
    expect(written).toHaveLength(1);
  });

  it("cached ISO time: one string per millisecond, in pino's isoTime form", () => {
    let now = Date.UTC(2026, 0, 2, 3, 4, 5, 678);
    const time = createCachedIsoTime(() => now);
    const first = time();
    expect(first).toBe(',"time":"2026-01-02T03:04:05.678Z"');
    expect(time()).toBe(first);
    now += 1;
    expect(time()).toBe(',"time":"2026-01-02T03:04:05.679Z"');
  });
});
