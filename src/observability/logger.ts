/**
 * The pino logger. JSON by default; `pretty` for humans. Redaction is belt and braces: code never
 * logs raw secrets or tokens on purpose, and these paths catch the ones that slip in via headers
 * or error objects.
 */
import { createRequire } from "node:module";
import { isSea } from "node:sea";
import { type DestinationStream, type Logger, pino } from "pino";

export const REDACT_PATHS = [
  "req.headers.authorization",
  "req.headers['proxy-authorization']",
  "req.headers.cookie",
  "res.headers['set-cookie']",
  "headers.authorization",
  "headers['proxy-authorization']",
  "headers.cookie",
  "headers['set-cookie']",
  "clientSecret",
  "client_secret",
  "*.clientSecret",
  "*.client_secret",
  "access_token",
  "*.access_token",
  "token",
  "*.token",
  "err.config",
];

export interface LoggerOptions {
  level: string;
  format: "json" | "pretty";
  /** Where to write; default stdout. Tests pass a stream to read records back. */
  destination?: DestinationStream;
}

/** The app logger, with redaction of credentials and tokens. */
export function createLogger(options: LoggerOptions): Logger {
  const base = {
    level: options.level,
    redact: { paths: REDACT_PATHS, censor: "[redacted]" },
    base: { service: "bearer-proxy" },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
  };
  if (options.format === "pretty" && !options.destination) {
    const pretty = { colorize: true, translateTime: "SYS:HH:MM:ss.l" };
    // A single executable has no files for pino's worker thread to run: pretty-print in-process.
    if (isSea()) return pino(base, loadPinoPretty()(pretty));
    return pino({ ...base, transport: { target: "pino-pretty", options: pretty } });
  }
  return options.destination ? pino(base, options.destination) : pino(base);
}

/** pino-pretty's stream factory, loaded only for the pretty format. */
function loadPinoPretty(): (options: object) => DestinationStream {
  return createRequire(import.meta.url)("pino-pretty") as (options: object) => DestinationStream;
}

export type { Logger };
