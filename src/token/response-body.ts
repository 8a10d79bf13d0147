/**
 * The fields of a token endpoint's answer, whatever media type it came in. RFC 6749 §5.1 says
 * application/json; older servers answer `access_token=…&expires_in=…` as
 * application/x-www-form-urlencoded or text/plain (the pre-RFC drafts and Facebook-era servers
 * did), and some label JSON as text/plain. Anything else (HTML, XML) is not a token response.
 */
import { sanitizeIdpText } from "./response-text.js";

/** The body as named fields, or why it could not be read as any. */
export type ResponseFields =
  | { kind: "json" | "form"; fields: Record<string, unknown> }
  | { kind: "none"; problem: string };

const JSON_TYPE = /^application\/([a-z0-9.+-]*\+)?json$/;
const FORM_TYPE = "application/x-www-form-urlencoded";
/** The fields whose value decides the token: a form body naming one twice is ambiguous. */
const SINGLE_FIELDS = ["access_token", "token_type", "expires_in", "scope"];

/** The media type without parameters, lowercased ("" when absent). */
export function mediaType(contentType: string): string {
  return (contentType.split(";")[0] ?? "").trim().toLowerCase();
}

/** Whether the body is labelled JSON (application/json or any +json type). */
export function isJsonType(contentType: string): boolean {
  return JSON_TYPE.test(mediaType(contentType));
}

/** Parse a body as JSON, undefined when it does not parse. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Read a success body. JSON by its label; a form body by its label; text/plain (or no label at
 * all) by its shape: a JSON object, else form fields that include access_token (or error).
 */
export function readResponseFields(contentType: string, text: string): ResponseFields {
  const type = mediaType(contentType);
  if (isJsonType(contentType)) return fromJson(text);
  if (type === FORM_TYPE) return fromForm(text);
  if (type === "text/plain" || type === "") {
    if (text.trimStart().startsWith("{")) return fromJson(text);
    if (/(^|&)(access_token|error)=/.test(text.trim())) return fromForm(text);
    const label = type === "" ? "no content type" : "content type text/plain";
    return { kind: "none", problem: `${label} and a body that is neither JSON nor form fields` };
  }
  return {
    kind: "none",
    problem: `content type ${describeContentType(contentType)}, expected application/json`,
  };
}

/** The content type as shown in messages. */
export function describeContentType(contentType: string): string {
  return contentType ? sanitizeIdpText(contentType, 80) : "(none)";
}

function fromJson(text: string): ResponseFields {
  const parsed = parseJson(text);
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    return { kind: "none", problem: "the body is not a JSON object" };
  }
  return { kind: "json", fields: parsed as Record<string, unknown> };
}

function fromForm(text: string): ResponseFields {
  const params = new URLSearchParams(text.trim());
  for (const name of SINGLE_FIELDS) {
    if (params.getAll(name).length > 1) {
      return { kind: "none", problem: `the form body names ${name} more than once` };
    }
  }
  // No prototype: a field named __proto__ stays a field.
  const fields: Record<string, unknown> = Object.create(null);
  for (const [name, value] of params) if (!(name in fields)) fields[name] = value;
  return { kind: "form", fields };
}
