/**
 * The fetch that jose's remote key set calls for `jwksUri`, in three layers:
 * `createJwksFetch` (undici, the bearer token, a 200 only with a JWKS), `withFailureBackoff`
 * (a failure holds the next fetch back) and `withLastGoodKeys` (a failed refresh answers with
 * the keys last fetched, for a bounded time). jose sees a 200 or a failure and knows nothing of
 * the rest.
 */
import { createLocalJWKSet, type FetchImplementation } from "jose";
import type { Logger } from "pino";
import type { Dispatcher } from "undici";
import { fingerprint } from "../base/fingerprint.js";
import { errorMessage } from "../errors.js";
import { request } from "../net/undici-core.js";
import { createLogThrottle } from "../observability/log-throttle.js";
import { JWKS_RETRY_AFTER_FAILURE_MS, JWKS_STALE_LIMIT_MS } from "./jwks-timing.js";
import type { JwksTokenFile } from "./jwks-token-file.js";

/** A cluster publishes a handful of keys; anything near this is not a JWKS. */
const MAX_JWKS_BYTES = 1024 * 1024;
/** A refresh failure answered with the kept keys is logged at most this often. */
const STALE_WARNING_INTERVAL_MS = 60_000;

/** JSON with a `keys` array, as jose's local key set wants it (it throws JWKSInvalid otherwise). */
export function parseJwks(text: string): ReturnType<typeof createLocalJWKSet> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new Error("not JSON");
  }
  try {
    return createLocalJWKSet(json as Parameters<typeof createLocalJWKSet>[0]);
  } catch {
    throw new Error('not a JSON Web Key Set (expected {"keys": [...]})');
  }
}

/**
 * jose's fetch hook over undici's `request` (the global fetch would use Node's bundled undici
 * and the global dispatcher; loading undici's own fetch costs memory, see net/undici-core.ts).
 * No redirect is followed (jose asks for `redirect: "manual"` and wants a 200), so the token
 * goes to `jwksUri`'s origin only. `token`, when given, is read afresh for each fetch. A 200
 * whose body jose would refuse is a failure here, so that the layers above neither keep it nor
 * let it reset the backoff.
 */
export function createJwksFetch(
  dispatcher: Dispatcher,
  token?: JwksTokenFile | undefined,
): FetchImplementation {
  return async (url, options) => {
    try {
      const headers = Object.fromEntries(options.headers.entries());
      const sent = token === undefined ? undefined : await token.read();
      if (sent !== undefined) headers.authorization = `Bearer ${sent}`;
      const response = await request(url, {
        dispatcher,
        method: "GET",
        headers,
        signal: options.signal,
      });
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of response.body) {
        size += (chunk as Buffer).length;
        if (size > MAX_JWKS_BYTES) {
          response.body.destroy();
          throw new Error(`JWKS response larger than ${MAX_JWKS_BYTES} bytes`);
        }
        chunks.push(chunk as Buffer);
      }
      if (response.statusCode === 401 || response.statusCode === 403) {
        // jose would say only "Expected 200 OK"; this is the answer an operator must act on.
        throw new Error(refusalMessage(response.statusCode, sent));
      }
      const body = Buffer.concat(chunks);
      if (response.statusCode === 200) {
        try {
          // TextDecoder drops a BOM, as the Response.json() jose would call does.
          parseJwks(new TextDecoder().decode(body));
        } catch (error) {
          throw new Error(`the JWKS server answered 200 with ${(error as Error).message}`);
        }
      }
      const nullBody = response.statusCode === 204 || response.statusCode === 304;
      return new Response(nullBody ? null : body, { status: response.statusCode });
    } catch (error) {
      // jose maps a TimeoutError to JWKSTimeout; undici reports the abort as its own error.
      if (options.signal.aborted) throw options.signal.reason;
      throw error;
    }
  };
}

/**
 * `fetch`, except that within JWKS_RETRY_AFTER_FAILURE_MS of a failure (an error, or an answer
 * other than 200) it fails at once with the same reason and sends nothing.
 */
export function withFailureBackoff(
  fetch: FetchImplementation,
  // Read Date at each call, as jose does: the same clock as its max age and cooldown.
  now: () => number = () => Date.now(),
): FetchImplementation {
  let failedAtMs = Number.NEGATIVE_INFINITY;
  let reason = "";
  return async (url, options) => {
    const sinceMs = now() - failedAtMs;
    if (sinceMs < JWKS_RETRY_AFTER_FAILURE_MS) {
      const waitS = Math.ceil((JWKS_RETRY_AFTER_FAILURE_MS - sinceMs) / 1000);
      throw new Error(`the last JWKS fetch failed (${reason}); the next is allowed in ${waitS} s`);
    }
    try {
      const response = await fetch(url, options);
      if (response.status === 200) failedAtMs = Number.NEGATIVE_INFINITY;
      else [failedAtMs, reason] = [now(), `answered ${response.status}`];
      return response;
    } catch (error) {
      [failedAtMs, reason] = [now(), errorMessage(error)];
      throw error;
    }
  };
}

/** jose's fetch hook from {@link withLastGoodKeys}, and what it knows of the last refresh. */
export type LastGoodKeysFetch = FetchImplementation & {
  /** True from a refresh that failed (kept keys answered, or none) until one succeeds. */
  lastRefreshFailed(): boolean;
};

export interface LastGoodKeysDeps {
  logger?: Pick<Logger, "warn" | "info"> | undefined;
  /** Wall-clock ms; default Date.now() at each call (jose's own clock). */
  now?: (() => number) | undefined;
}

/**
 * `fetch`, except that when it fails (an error, or an answer other than 200) after some fetch
 * succeeded, the body of that last 200 is answered instead, as a 200, until it is
 * JWKS_STALE_LIMIT_MS old; then the failure goes through. A refresh that fails (after
 * `cacheMaxAge`, or on an unknown `kid`) would otherwise fail jose's verification of every
 * token, so every service-account caller from the tenth minute of any API-server outage on.
 *
 * Safe for key rotation, which adds a key before signing with it and removes the old one only
 * after its tokens expired: the kept keys verify exactly the tokens they verified before the
 * outage. Envoy's jwt_authn does the same with `async_fetch` (a failed refetch leaves the keys in
 * force, with no limit at all). jose takes the kept body as a fresh fetch: the next refresh is
 * tried `cacheMaxAge` later, an unknown `kid` still tries one after the cooldown (which fails
 * over to the kept body again while the server is down), and JWKS_RETRY_AFTER_FAILURE_MS below
 * this layer still holds the attempts back. The bound: keys that cannot be refreshed are used
 * at most JWKS_STALE_LIMIT_MS past their fetch, plus the `cacheMaxAge` jose trusts them after
 * the last failed refresh that served them. `lastRefreshFailed()` says whether the keys jose
 * holds may lack one published since: a kid they do not name is then no proof of a bad token.
 */
export function withLastGoodKeys(
  fetch: FetchImplementation,
  deps: LastGoodKeysDeps = {},
): LastGoodKeysFetch {
  const now = deps.now ?? (() => Date.now());
  let kept: { body: Uint8Array; fetchedAtMs: number } | undefined;
  const staleWarnings = createLogThrottle(STALE_WARNING_INTERVAL_MS, now);
  /**
   * The latest attempt failed, whatever was answered (the backoff's refusals included); with
   * keys kept, they were being served stale (to log when a refresh works again).
   */
  let lastFailed = false;

  const fetchOrKept: FetchImplementation = async (url, options) => {
    let problem: string;
    try {
      const response = await fetch(url, options);
      if (response.status === 200) {
        const body = new Uint8Array(await response.arrayBuffer());
        if (lastFailed && kept !== undefined) {
          deps.logger?.info(
            "callers.kubernetes: the JWKS refresh succeeded again; the keys are current",
          );
        }
        lastFailed = false;
        kept = { body, fetchedAtMs: now() };
        return new Response(body, { status: 200 });
      }
      lastFailed = true;
      if (kept === undefined) return response;
      problem = `answered ${response.status}`;
    } catch (error) {
      lastFailed = true;
      if (kept === undefined) throw error;
      problem = errorMessage(error);
    }
    const ageMs = now() - kept.fetchedAtMs;
    if (ageMs > JWKS_STALE_LIMIT_MS) {
      throw new Error(
        `the JWKS refresh failed (${problem}) and the keys fetched ${formatAge(ageMs)} ago are past the ${formatAge(JWKS_STALE_LIMIT_MS)} limit for keys that cannot be refreshed`,
      );
    }
    staleWarnings.count();
    if (staleWarnings.takeIfDue() !== undefined) {
      // `problem` names the jwksTokenFile token by fingerprint only (refusalMessage).
      deps.logger?.warn(
        {
          keysAgeSeconds: Math.floor(ageMs / 1000),
          staleLimitSeconds: JWKS_STALE_LIMIT_MS / 1000,
          problem,
        },
        "callers.kubernetes: the JWKS refresh failed; verifying with the keys last fetched",
      );
    }
    return new Response(kept.body, { status: 200 });
  };
  return Object.assign(fetchOrKept, { lastRefreshFailed: () => lastFailed });
}

/** Why the JWKS server refused the fetch, and what to change; the token only by fingerprint. */
function refusalMessage(status: 401 | 403, sent: string | undefined): string {
  if (sent === undefined) {
    return `the JWKS server answered ${status} to an anonymous fetch: the API server's /openid/v1/jwks serves authenticated service accounts; set callers.kubernetes.jwksTokenFile`;
  }
  const which = `the token of callers.kubernetes.jwksTokenFile (fingerprint ${fingerprint(sent)})`;
  return status === 401
    ? `the JWKS server answered 401 to ${which}: not valid there (expired, or not its audience)`
    : `the JWKS server answered 403 to ${which}: its identity may not read the keys (ClusterRole system:service-account-issuer-discovery)`;
}

/** `3 h 25 min`, `12 min`, `40 s`: an age for a log line. */
function formatAge(ms: number): string {
  const totalMinutes = Math.floor(ms / 60_000);
  if (totalMinutes === 0) return `${Math.floor(ms / 1000)} s`;
  const hours = Math.floor(totalMinutes / 60);
  const minutes = totalMinutes % 60;
  if (hours === 0) return `${minutes} min`;
  return minutes === 0 ? `${hours} h` : `${hours} h ${minutes} min`;
}
