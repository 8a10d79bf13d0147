import { Writable } from "node:stream";
import { type Logger, pino } from "pino";
import type { TokenEndpointSpec, TokenPolicy } from "../../src/config/types.js";

/** The documented defaults (config/schema.ts), in ms. */
export const DEFAULT_POLICY: TokenPolicy = Object.freeze({
  defaultExpiresInMs: 600_000,
  refreshWindow: [0.75, 0.85] as const,
  requestTimeoutMs: 10_000,
  waitTimeoutMs: 5_000,
  minAgeBeforeInvalidateMs: 2_000,
  minRefreshIntervalMs: 1_000,
  initialBackoffMs: 1_000,
  maxBackoffMs: 30_000,
  prefetch: true,
});

export const TEST_SECRET = "s3cr3t-+&=% é🙂-value";

export function makeSpec(overrides: Partial<TokenEndpointSpec> = {}): TokenEndpointSpec {
  return {
    tokenUrl: "https://idp.test/iam/v1/oauth2/token",
    versionHeader: undefined,
    format: "form",
    clientAuth: "body",
    clientId: { kind: "inline", value: "demo-client" },
    clientSecret: { kind: "inline", value: TEST_SECRET },
    scope: undefined,
    extraParams: {},
    extraHeaders: {},
    tls: { caFile: undefined, certFile: undefined, keyFile: undefined, serverName: undefined },
    allowInsecureHttp: false,
    ...overrides,
  };
}

export interface LogRecord {
  level: number;
  msg: string;
  [key: string]: unknown;
}

/** A pino logger whose records (and raw text) the test can read back. */
export function captureLogs(): { logger: Logger; records: LogRecord[]; text: () => string } {
  const records: LogRecord[] = [];
  let raw = "";
  const stream = new Writable({
    write(chunk, _encoding, callback) {
      const text = chunk.toString();
      raw += text;
      for (const line of text.split("\n")) if (line.trim()) records.push(JSON.parse(line));
      callback();
    },
  });
  return { logger: pino({ level: "debug" }, stream), records, text: () => raw };
}

/** A deterministic uniform [0, 1) sequence (mulberry32). */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
