/**
 * The pino logger. JSON by default; `pretty` for humans. Redaction is belt and braces: code never
 * logs raw secrets or tokens on purpose, and these paths catch the ones that slip in via headers
 * or error objects.
 */
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
    return pino({
      ...base,
      transport: {
        target: "pino-pretty",
        options: { colorize: true, translateTime: "SYS:HH:MM:ss.l" },
      },
    });
  }
  return options.destination ? pino(base, options.destination) : pino(base);
}

export type { Logger };
