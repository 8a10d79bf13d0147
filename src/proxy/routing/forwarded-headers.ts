/**
 * The header list sent upstream: the client's fields minus hop-by-hop and credential fields,
 * then ours, with an empty slot for the credential that exchange/credential.ts writes into it
 * for every attempt.
 *
 * Order of operations matters: the client's `Connection` tokens are applied to the client's
 * fields only, and the injected fields are appended afterwards, so `Connection: authorization`
 * can't remove the Authorization we add (the reply-from / Envoy rule).
 */

import { HOP_BY_HOP_HEADERS } from "../../base/hop-by-hop.js";
import type { UpstreamConfig } from "../../config/proxy-config.js";
import { isFieldName } from "../../net/raw-headers.js";

/**
 * Fields never forwarded as the client sent them: hop-by-hop (RFC 9110 §7.6.1), Host (ours
 * replaces it, RFC 9112 §3.2), Expect (undici can't send it; Node already answered
 * 100-continue), Forwarded (spoofable topology), and Trailer: undici ends a chunked request
 * body with an empty trailer section, so announcing fields that never come would mislead the
 * upstream (RFC 9110 §6.6.2).
 */
const ALWAYS_DROPPED = new Set([...HOP_BY_HOP_HEADERS, "host", "expect", "forwarded", "trailer"]);

/**
 * The client's Content-Length (already checked: one value, digits only) is forwarded as is:
 * undici frames a streamed body with it instead of chunking it (upstreams that need a length —
 * object stores — answer 411 to chunked uploads), and checks the bytes sent against it.
 * A static header may not set it; `Connection` may not remove it.
 */
const CONTENT_LENGTH = "content-length";
const DIGITS = /^[0-9]+$/;

/**
 * Credential fields the client may not send (replaced, or 400 with `clientCredentials: reject`).
 * A client's own `DPoP` proof is dropped too: proofs are ours to sign (RFC 9449 §4).
 */
const CREDENTIAL_FIELDS = new Set(["authorization", "x-version", "dpop"]);

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** A field value may hold HTAB, visible ASCII, SP and obs-text; never CR, LF or NUL. */
const INVALID_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

/** Request facts used for the opt-in X-Forwarded-* fields. */
export interface ForwardedContext {
  /** Client IP address. */
  remoteAddress: string | undefined;
  /** The authority the client addressed (Host, or the absolute-form URI's). */
  authority: string | undefined;
  /** How the client reached us: plain http, or https inside a terminated CONNECT. Default http. */
  proto?: "http" | "https" | undefined;
}

export type InjectResult =
  | {
      kind: "ok";
      /** Flat [name, value, name, value, …] list for undici `dispatch`. */
      headers: string[];
      /** Index in `headers` of the Authorization value (written per attempt, exchange/credential.ts). */
      authorizationIndex: number;
      /** Index of the `DPoP` proof value (signed per attempt), or -1 without `dpop`. */
      dpopIndex: number;
    }
  | { kind: "reject"; message: string };

export interface HeaderInjector {
  /** Builds the upstream header list from the client's raw headers. */
  build(rawHeaders: readonly string[], context: ForwardedContext): InjectResult;
}

/** The upstream's authority for the Host field: host, plus the port when not 443. */
export function upstreamAuthority(upstream: UpstreamConfig): string {
  return new URL(upstream.origin).host;
}

/** Checks a static `upstream.headers` entry once, at start. */
function checkStaticHeader(upstreamName: string, name: string, value: string): void {
  const lower = name.toLowerCase();
  if (!TOKEN.test(name) || INVALID_VALUE.test(value)) {
    throw new Error(`upstream ${upstreamName}: invalid static header ${name}`);
  }
  if (
    ALWAYS_DROPPED.has(lower) ||
    lower === CONTENT_LENGTH ||
    CREDENTIAL_FIELDS.has(lower) ||
    lower.startsWith("x-forwarded-")
  ) {
    throw new Error(`upstream ${upstreamName}: static header ${name} is managed by the proxy`);
  }
}

/** Splits `Connection` values into the lowercase field names they nominate. */
function connectionTokens(raw: readonly string[]): Set<string> | undefined {
  let tokens: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (!isFieldName(name, "connection")) continue;
    tokens ??= new Set();
    for (const part of raw[i + 1]!.split(",")) {
      const token = part.trim().toLowerCase();
      if (token) tokens.add(token);
    }
  }
  return tokens;
}

/** W3C trace context fields (a traced proxy writes its own; see observability/tracing.ts). */
const TRACE_CONTEXT = new Set(["traceparent", "tracestate"]);

export interface HeaderInjectorOptions {
  /**
   * Tracing is on: the client's `traceparent`/`tracestate` are left out (the SERVER span
   * continues them and each attempt writes its own), so no stale or duplicate field goes up.
   */
  dropTraceContext?: boolean | undefined;
}

/** Precomputes everything static for one upstream (injected tail, dropped names). */
export function createHeaderInjector(
  upstream: UpstreamConfig,
  options: HeaderInjectorOptions = {},
): HeaderInjector {
  const dropTraceContext = options.dropTraceContext === true;
  const staticNames = new Set<string>();
  const tail: string[] = ["host", upstreamAuthority(upstream), "authorization", ""];
  // The proof's slot right after Authorization: filled per attempt (proxy/credential.ts).
  const hasDpop = upstream.token?.dpop !== undefined;
  if (hasDpop) tail.push("dpop", "");
  if (upstream.versionHeader !== undefined) {
    if (INVALID_VALUE.test(upstream.versionHeader)) {
      throw new Error(`upstream ${upstream.name}: invalid X-Version value`);
    }
    tail.push("x-version", upstream.versionHeader);
  }
  for (const [name, value] of Object.entries(upstream.headers)) {
    checkStaticHeader(upstream.name, name, value);
    staticNames.add(name.toLowerCase());
    tail.push(name, value);
  }
  const rejectCredentials = upstream.clientCredentials === "reject";
  const forwarded = upstream.forwardedHeaders;
  return {
    build(raw, context) {
      const named = connectionTokens(raw);
      const headers: string[] = [];
      let sawContentLength = false;
      for (let i = 0; i < raw.length; i += 2) {
        const name = raw[i]!;
        const value = raw[i + 1]!;
        const lower = name.toLowerCase();
        if (CREDENTIAL_FIELDS.has(lower)) {
          if (rejectCredentials) {
            return {
              kind: "reject",
              message: `the client must not send ${lower}: this proxy injects it (upstream ${upstream.name} is set to reject)`,
            };
          }
          continue;
        }
        if (lower === CONTENT_LENGTH) {
          // The guards refused anything else already; this keeps the module safe on its own.
          if (!DIGITS.test(value) || sawContentLength) {
            return { kind: "reject", message: "invalid Content-Length" };
          }
          sawContentLength = true;
          headers.push(name, value);
          continue;
        }
        if (
          ALWAYS_DROPPED.has(lower) ||
          lower.startsWith("x-forwarded-") ||
          staticNames.has(lower) ||
          named?.has(lower) ||
          (dropTraceContext && TRACE_CONTEXT.has(lower))
        ) {
          continue;
        }
        if (!TOKEN.test(name) || INVALID_VALUE.test(value)) {
          return { kind: "reject", message: "invalid header field" };
        }
        headers.push(name, value);
      }
      const authorizationIndex = headers.length + 3;
      const dpopIndex = hasDpop ? authorizationIndex + 2 : -1;
      for (const item of tail) headers.push(item);
      if (forwarded) {
        if (context.remoteAddress) headers.push("x-forwarded-for", context.remoteAddress);
        headers.push("x-forwarded-proto", context.proto ?? "http");
        if (context.authority && !INVALID_VALUE.test(context.authority)) {
          headers.push("x-forwarded-host", context.authority);
        }
      }
      return { kind: "ok", headers, authorizationIndex, dpopIndex };
    },
  };
}
