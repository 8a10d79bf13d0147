/**
 * Server-provided DPoP nonces (RFC 9449 §8 for the authorization server, §9 for resource
 * servers), kept per origin and updated from the `DPoP-Nonce` field of every response, so a
 * server that rotates its nonce in successful responses costs no extra round trip; only a
 * first request, or one after an unannounced rotation, meets `use_dpop_nonce` and is retried.
 */
import { LRUCache } from "lru-cache";
import { fieldValues, type RawHeaders } from "../../net/raw-headers.js";
import { findChallenge } from "./www-authenticate.js";

/**
 * Response fields as undici gives them: an object with lowercase names (`request`), or the
 * flat `[name, value, …]` list of the dispatcher handler API (`onHeaders`).
 */
export type ResponseHeaders =
  | Readonly<Record<string, string | string[] | undefined>>
  | readonly (string | Buffer)[];

export interface NonceStore {
  get(origin: string): string | undefined;
  /** Takes the `DPoP-Nonce` of a response from `origin`, if it has a valid one; returns it. */
  update(origin: string, headers: ResponseHeaders): string | undefined;
  set(origin: string, nonce: string): void;
  delete(origin: string): void;
  readonly size: number;
}

export interface NonceStoreOptions {
  /** Most origins remembered (least recently used dropped first). Default 256. */
  max?: number | undefined;
}

/** RFC 9449 §8.1: nonce = 1*NQCHAR, NQCHAR = %x21 / %x23-5B / %x5D-7E. */
const NONCE = /^[\x21\x23-\x5b\x5d-\x7e]+$/;
/** Longest nonce taken: real ones are tens of characters; it rides in every proof. */
export const MAX_NONCE_LENGTH = 1024;

export function createNonceStore(options: NonceStoreOptions = {}): NonceStore {
  const cache = new LRUCache<string, string>({ max: options.max ?? 256 });
  return {
    get: (origin) => cache.get(origin),
    update(origin, headers) {
      const nonce = dpopNonceOf(headers);
      if (nonce !== undefined && cache.get(origin) !== nonce) cache.set(origin, nonce);
      return nonce;
    },
    set(origin, nonce) {
      if (isValidNonce(nonce)) cache.set(origin, nonce);
    },
    delete(origin) {
      cache.delete(origin);
    },
    get size() {
      return cache.size;
    },
  };
}

/** The response's `DPoP-Nonce`, when it is one valid value (RFC 9449 §8.1). */
export function dpopNonceOf(headers: ResponseHeaders): string | undefined {
  const value = headerValue(headers, "dpop-nonce");
  return typeof value === "string" && isValidNonce(value) ? value : undefined;
}

export function isValidNonce(value: string): boolean {
  return value.length <= MAX_NONCE_LENGTH && NONCE.test(value);
}

/**
 * Whether a response asks for the request again with the nonce it carries:
 * - an authorization server: 400 with the JSON error `use_dpop_nonce` (RFC 9449 §8);
 * - a resource server: 401 with `WWW-Authenticate: DPoP error="use_dpop_nonce"` (§9).
 * Either way only with a valid `DPoP-Nonce`: without one a retry could not do better.
 * `body` is the AS's response text (or its parsed JSON); resource servers need none.
 */
export function isUseDpopNonceError(
  status: number,
  headers: ResponseHeaders,
  body?: unknown,
): boolean {
  if (status !== 400 && status !== 401) return false;
  if (dpopNonceOf(headers) === undefined) return false;
  if (status === 401) {
    const challenge = findChallenge(headerValue(headers, "www-authenticate"), "dpop");
    return challenge?.params.error === "use_dpop_nonce";
  }
  return errorCodeOf(body) === "use_dpop_nonce";
}

/** The RFC 6749 §5.2 `error` of a token endpoint error body, text or parsed. */
function errorCodeOf(body: unknown): string | undefined {
  if (typeof body === "string") {
    // Error bodies are small; a big one is not the JSON we look for.
    if (body.length > 64 * 1024) return undefined;
    try {
      body = JSON.parse(body);
    } catch {
      return undefined;
    }
  }
  if (typeof body !== "object" || body === null) return undefined;
  const error = (body as { error?: unknown }).error;
  return typeof error === "string" ? error : undefined;
}

/**
 * One field's value(s): a string, several for a repeated field, undefined when absent. In a
 * flat list names are matched case-insensitively; an object's names are lowercase (undici).
 */
function headerValue(headers: ResponseHeaders, name: string): string | string[] | undefined {
  if (!Array.isArray(headers)) {
    return (headers as Readonly<Record<string, string | string[] | undefined>>)[name];
  }
  const values = fieldValues(headers as RawHeaders, name);
  return values.length <= 1 ? values[0] : values;
}
