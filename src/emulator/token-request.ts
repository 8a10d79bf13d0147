/**
 * Parsing of token requests (RFC 6749 §4.4.2, §2.3.1), strict where SPEC.md is precise.
 * Parsers return either the fields or a description for an `invalid_request` error; the
 * description never repeats submitted values, which may be secrets.
 */

export type BodyEncoding = "form" | "json";

/** The parameters the token endpoint looks at; anything else is accepted and ignored. */
export interface TokenParams {
  client_id?: string;
  client_secret?: string;
  grant_type?: string;
  scope?: string;
  /** Auth0-style API selector; only looked at when audiences are refused (`refuseAudiences`). */
  audience?: string;
}

export type ParseResult<T> = { ok: true; value: T } | { ok: false; description: string };

const KNOWN_PARAMS = ["client_id", "client_secret", "grant_type", "scope", "audience"] as const;

// SPEC.md names exactly `application/x-www-form-urlencoded;charset=UTF-8`. Media types and the
// charset value are case-insensitive (RFC 9110 §8.3.1, RFC 2046) and OWS may surround ";", so we
// allow those and nothing else: no missing charset, no other parameters, no quoted "UTF-8".
const FORM_TYPE = /^application\/x-www-form-urlencoded[ \t]*;[ \t]*charset=utf-8$/i;
// SPEC.md names exactly `application/json`, without parameters.
const JSON_TYPE = /^application\/json$/i;

/** Which accepted encoding a Content-Type names, or undefined if it is not accepted. */
export function classifyContentType(contentType: string | undefined): BodyEncoding | undefined {
  if (contentType === undefined) return undefined;
  const value = contentType.trim();
  if (FORM_TYPE.test(value)) return "form";
  if (JSON_TYPE.test(value)) return "json";
  return undefined;
}

// Decode one application/x-www-form-urlencoded name or value: "+" is a space, then
// percent-decoding as UTF-8. Malformed escapes and invalid UTF-8 throw (URIError).
function decodeFormComponent(text: string): string {
  return decodeURIComponent(text.replaceAll("+", " "));
}

/** Parse a form body; a known parameter given twice is an error (RFC 6749 §3.2). */
export function parseFormBody(body: Buffer): ParseResult<TokenParams> {
  const text = decodeUtf8(body);
  if (text === undefined) return { ok: false, description: "request body is not valid UTF-8" };
  const params: Record<string, string> = {};
  const seen = new Set<string>();
  for (const pair of text.split("&")) {
    if (pair === "") continue;
    const eq = pair.indexOf("=");
    let name: string;
    let value: string;
    try {
      name = decodeFormComponent(eq === -1 ? pair : pair.slice(0, eq));
      value = decodeFormComponent(eq === -1 ? "" : pair.slice(eq + 1));
    } catch {
      return { ok: false, description: "malformed percent-encoding in form body" };
    }
    if (seen.has(name)) return { ok: false, description: `parameter ${safeName(name)} repeated` };
    seen.add(name);
    params[name] = value;
  }
  return { ok: true, value: pickKnown(params) };
}

/** Parse a JSON body: an object whose known fields, when present, are strings. */
export function parseJsonBody(body: Buffer): ParseResult<TokenParams> {
  const text = decodeUtf8(body);
  if (text === undefined) return { ok: false, description: "request body is not valid UTF-8" };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, description: "request body is not valid JSON" };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { ok: false, description: "request body must be a JSON object" };
  }
  const record = value as Record<string, unknown>;
  for (const name of KNOWN_PARAMS) {
    if (Object.hasOwn(record, name) && typeof record[name] !== "string") {
      return { ok: false, description: `${name} must be a string` };
    }
  }
  return { ok: true, value: pickKnown(record as Record<string, string>) };
}

/**
 * Decode HTTP Basic client credentials (RFC 6749 §2.3.1): base64 of
 * `urlencode(client_id):urlencode(client_secret)`. The scheme name is case-insensitive
 * (RFC 9110 §11.1); exactly one space must follow it.
 */
export function parseBasicCredentials(
  header: string,
): ParseResult<{ clientId: string; clientSecret: string }> {
  const match = /^basic ([A-Za-z0-9+/]+={0,2})$/i.exec(header);
  if (!match || match[1]!.length % 4 !== 0) {
    return { ok: false, description: "malformed Basic credentials" };
  }
  const decoded = decodeUtf8(Buffer.from(match[1]!, "base64"));
  const colon = decoded?.indexOf(":") ?? -1;
  if (decoded === undefined || colon === -1) {
    return { ok: false, description: "malformed Basic credentials" };
  }
  try {
    return {
      ok: true,
      value: {
        clientId: decodeFormComponent(decoded.slice(0, colon)),
        clientSecret: decodeFormComponent(decoded.slice(colon + 1)),
      },
    };
  } catch {
    return { ok: false, description: "malformed percent-encoding in Basic credentials" };
  }
}

function pickKnown(record: Record<string, string>): TokenParams {
  const params: TokenParams = {};
  for (const name of KNOWN_PARAMS) {
    if (Object.hasOwn(record, name)) params[name] = record[name]!;
  }
  return params;
}

function decodeUtf8(body: Buffer): string | undefined {
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(body);
  } catch {
    return undefined;
  }
}

// Parameter names are not secret, but keep error descriptions short and printable.
function safeName(name: string): string {
  return /^[\w.-]{1,40}$/.test(name) ? name : "(unprintable)";
}
