/**
 * Turning what a token endpoint says into text that is safe to log and show: the endpoint URL
 * without query or userinfo, the IdP's error strings without control characters, and
 * Retry-After as seconds.
 */

import { loggableUrl } from "../base/loggable-url.js";
import { retryAfterMs } from "../base/retry-after.js";

/** Most seconds of Retry-After honoured; a day-long value is a misconfigured IdP, not advice. */
export const MAX_RETRY_AFTER_SECONDS = 300;

/** The token URL as shown in messages: no userinfo, query or fragment (they may hold secrets). */
export function describeTokenUrl(tokenUrl: string): string {
  try {
    return loggableUrl(tokenUrl);
  } catch {
    return "(invalid token URL)";
  }
}

/** Strip control characters (C0, DEL, C1) and truncate: IdP text goes into logs and headers. */
export function sanitizeIdpText(text: string, maxLength: number): string {
  const clean = text.replace(/[\u0000-\u001f\u007f-\u009f]+/g, " ").trim();
  return clean.length > maxLength ? `${clean.slice(0, maxLength - 1)}…` : clean;
}

/**
 * A token endpoint's Retry-After (base/retry-after.ts) in whole seconds from `wallNowMs`,
 * capped at MAX_RETRY_AFTER_SECONDS, or undefined when absent or unparsable.
 */
export function retryAfterSeconds(
  value: string | undefined,
  wallNowMs: number,
): number | undefined {
  const waitMs = retryAfterMs(value, wallNowMs);
  if (waitMs === undefined) return undefined;
  return Math.min(Math.ceil(waitMs / 1000), MAX_RETRY_AFTER_SECONDS);
}
