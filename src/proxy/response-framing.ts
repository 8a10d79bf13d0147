/**
 * What the response's framing allows on the client side, beyond relaying the fields
 * (response-headers.ts): whether the head must go out before any body byte, whether trailers
 * can follow, and the shapes Node wants for 103 Early Hints and trailers.
 *
 * - A response without Content-Length (a stream, long-poll, server-sent events) may send its
 *   first byte much later than its head: the head is flushed at once, or clients' header
 *   timeouts and EventSource `open` wait for data (Node holds the head until the first write).
 * - Trailers travel only in a chunked message (RFC 9112 §7.1.2). Node answers an HTTP/1.0
 *   client without chunking and refuses a `Trailer` field on a message it doesn't chunk, so
 *   there the field is dropped along with the trailers (announcing fields that never come
 *   misleads the client, RFC 9110 §6.6.2).
 */
import { isFieldName } from "../net/raw-headers.js";
import { clientResponseHeaders } from "./response-headers.js";

export interface ResponseFraming {
  /** The response names its length: its body follows the head without a pause. */
  hasContentLength: boolean;
  /** `text/event-stream`: flushed even with a length (some servers send one for the first event). */
  eventStream: boolean;
  /** The response carries a `Trailer` field. */
  announcesTrailers: boolean;
}

/** One pass over the client header list ([name, value, …], as sent). */
export function responseFraming(headers: readonly string[]): ResponseFraming {
  let hasContentLength = false;
  let eventStream = false;
  let announcesTrailers = false;
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    if (isFieldName(name, "content-length")) hasContentLength = true;
    else if (isFieldName(name, "trailer")) announcesTrailers = true;
    else if (isFieldName(name, "content-type")) {
      eventStream = headers[i + 1]!.trimStart().toLowerCase().startsWith("text/event-stream");
    }
  }
  return { hasContentLength, eventStream, announcesTrailers };
}

/** RFC 9110 §6.4.1: these responses never have a body (and so no trailers either). */
export function responseHasBody(method: string, statusCode: number): boolean {
  return method !== "HEAD" && statusCode !== 204 && statusCode !== 304 && statusCode >= 200;
}

/** Node chunks a body-carrying response without Content-Length to an HTTP/1.1 client. */
export function clientGetsChunked(
  req: { httpVersionMajor: number; httpVersionMinor: number },
  framing: ResponseFraming,
): boolean {
  return (req.httpVersionMajor > 1 || req.httpVersionMinor >= 1) && !framing.hasContentLength;
}

/** The list without fields of that (lowercase) name. */
export function withoutField(headers: readonly string[], lowerName: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < headers.length; i += 2) {
    if (!isFieldName(headers[i]!, lowerName)) out.push(headers[i]!, headers[i + 1]!);
  }
  return out;
}

/** Trailer fields as `res.addTrailers` takes them, hop-by-hop fields dropped. */
export function trailerPairs(raw: readonly (Buffer | string)[]): [string, string][] {
  const flat = clientResponseHeaders(raw, false);
  const pairs: [string, string][] = [];
  for (let i = 0; i < flat.length; i += 2) pairs.push([flat[i]!, flat[i + 1]!]);
  return pairs;
}

/**
 * A 103's fields as `res.writeEarlyHints` takes them (it writes nothing without a `Link`), or
 * undefined when there is no Link to relay.
 */
export function earlyHints(
  raw: readonly (Buffer | string)[],
): Record<string, string | string[]> | undefined {
  const flat = clientResponseHeaders(raw, false);
  const hints: Record<string, string | string[]> = {};
  const links: string[] = [];
  for (let i = 0; i < flat.length; i += 2) {
    const name = flat[i]!.toLowerCase();
    const value = flat[i + 1]!;
    if (name === "link") links.push(value);
    else hints[name] = name in hints ? `${hints[name]}, ${value}` : value;
  }
  if (links.length === 0) return undefined;
  hints.link = links;
  return hints;
}
