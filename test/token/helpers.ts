import { Writable } from "node:stream";
import { type Logger, pino } from "pino";
import type { TokenEndpointSpec } from "../../src/config/proxy-config.js";
import { makeTokenSpec } from "../helpers/upstream-config.js";

export { DEFAULT_POLICY } from "../helpers/upstream-config.js";

export const TEST_SECRET = "s3cr3t-+&=% é🙂-value";

/** The token spec of a default upstream at https://idp.test, with TEST_SECRET as its secret. */
export function makeSpec(overrides: Partial<TokenEndpointSpec> = {}): TokenEndpointSpec {
  return makeTokenSpec({ clientSecret: TEST_SECRET }, overrides);
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
