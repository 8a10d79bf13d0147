/**
 * One credential's token, kept fresh: prefetched, refreshed early in the background at a random
 * point of its lifetime, fetched at most once at a time (single flight, Envoy
 * `token_provider.cc`), retried with backoff on failure while the old token stays usable, and
 * dropped when the secret or the DPoP key rotates or the upstream rejects it. With
 * `upstreams[].dpop` the source holds the credential's one DPoP key (dpop/lazy-dpop.ts), and
 * every token it hands out carries it (`AccessToken.dpop`).
 */
import type { Logger } from "pino";
import type { Dispatcher } from "undici";
import { computeBackoffMs } from "../base/backoff.js";
import { type Clock, systemClock } from "../base/clock.js";
import type { TokenEndpointSpec, TokenPolicy } from "../config/proxy-config.js";
import { type BearerProxyError, ERROR_CODES } from "../errors.js";
import type { Metrics } from "../observability/metrics.js";
import { NOOP_TRACING, type TokenSpan, type Tracing } from "../observability/tracing.js";
import { type ClientCredentials, requestToken, type TokenResponse } from "./client-credentials.js";
import type { Dpop } from "./dpop/index.js";
import { createLazyDpop, type LazyDpop } from "./dpop/lazy-dpop.js";
import { describeTokenUrl } from "./response-text.js";
import {
  type CredentialReader,
  type Credentials,
  createCredentialReader,
} from "./secret-reader.js";
import { toTokenError, unavailableError } from "./token-errors.js";
import { type CachedToken, isUsable, planToken } from "./token-lifetime.js";
import { logFetchFailure, logFetchSuccess, round1 } from "./token-log.js";
import type {
  AccessToken,
  TokenOriginStatus,
  TokenProvider,
  TokenStatus,
} from "./token-provider.js";
import { describeTokenStatus } from "./token-status.js";
import { createWaiterSet } from "./waiters.js";

/**
 * What a token request answers: the token response, and, when the token was not asked of the
 * token endpoint but taken from the shared Redis cache, when the token endpoint issued it.
 */
export interface FetchedToken extends TokenResponse {
  sharedCache?: { issuedAtWallMs: number } | undefined;
}

export interface TokenSourceOptions {
  /** Upstream name for logs and metric labels. */
  upstream: string;
  /** Every upstream sharing this source, for metric labels; default [upstream]. */
  upstreams?: readonly string[];
  spec: TokenEndpointSpec;
  policy: TokenPolicy;
  /** Dispatcher for the token endpoint; required unless fetchToken is given. */
  dispatcher?: Dispatcher;
  clock?: Clock;
  logger: Logger;
  metrics?: Metrics | undefined;
  /** Uniform in [0, 1) for refresh points and jitter; injectable for tests. */
  random?: () => number;
  /**
   * Replaces the token request (tests, a shared cache). `dpop`: the credential's DPoP key
   * (`spec.dpop` set), which the request must prove possession of.
   */
  fetchToken?: (
    credentials: ClientCredentials,
    signal: AbortSignal,
    dpop?: Dpop | undefined,
  ) => Promise<FetchedToken>;
  /** Replaces the credential reader built from spec (tests). Closed with the source. */
  credentialReader?: CredentialReader;
  /** Poll interval for secret files and `dpop.keyFile`; default 5000 ms. */
  secretPollIntervalMs?: number;
  /**
   * Refresh in the background even when nobody used the token since it was fetched. Default
   * true; lazily created sources of a large gateway turn it off so idle credentials cost nothing.
   */
  idleRefresh?: boolean;
  /** A span per token fetch (in the trace of the request that caused it); default: off. */
  tracing?: Tracing | undefined;
}

export { expiryMarginMs } from "./token-lifetime.js";

/** A token source for one credential; call `start()` to prefetch. */
export function createTokenSource(options: TokenSourceOptions): TokenProvider {
  const { spec, policy } = options;
  const clock = options.clock ?? systemClock;
  const random = options.random ?? Math.random;
  const labels = options.upstreams ?? [options.upstream];
  const log = options.logger.child({ component: "token", upstream: options.upstream });
  const where = describeTokenUrl(spec.tokenUrl);
  const reader =
    options.credentialReader ??
    createCredentialReader(spec, { clock, pollIntervalMs: options.secretPollIntervalMs });
  const fetchToken = options.fetchToken ?? defaultFetch(options, clock);
  const waiters = createWaiterSet(clock);

  let token: CachedToken | undefined;
  let usedSinceFetch = false;
  let inflight = false;
  /** The span of the fetch in flight, for waiters that did not start it to link to. */
  let fetchSpan: TokenSpan | undefined;
  /** The wait that started the current fetch (its parent): it needs no link to its own child. */
  let fetchCause: TokenSpan | undefined;
  const tracing = options.tracing ?? NOOP_TRACING;
  let fetchAbort: AbortController | undefined;
  let timer: unknown;
  let nextAttemptAtMs: number | undefined;
  let lastFetchStartMs: number | undefined;
  let latestVersion: string | undefined;
  let consecutiveFailures = 0;
  let lastError: BearerProxyError | undefined;
  let lastErrorAtWallMs: number | undefined;
  let lastFetchAtWallMs: number | undefined;
  let lastFetchDurationMs: number | undefined;
  /** Token endpoint requests (counted when they end), and tokens taken from the shared cache. */
  let fetchCount = 0;
  let failureCount = 0;
  let sharedCacheHits = 0;
  /** Where the current `token` came from. */
  let origin: TokenOriginStatus | undefined;
  let closed = false;
  /** Response notes already warned about (once per source). */
  const notesLogged = new Set<string>();

  const unsubscribe = reader.onChange(onCredentialsChanged);
  const dpopKey = spec.dpop === undefined ? undefined : createSourceDpop(spec.dpop);

  function createSourceDpop(dpopSpec: NonNullable<TokenEndpointSpec["dpop"]>): LazyDpop {
    return createLazyDpop(dpopSpec, {
      clock,
      pollIntervalMs: options.secretPollIntervalMs,
      onLoad: (dpop) => log.info({ dpop: dpop.describe() }, "DPoP key loaded"),
      onKeyChange: onDpopKeyChanged,
      onKeyReloadError: (error) =>
        log.warn(
          { code: error.code, reason: error.message },
          "dpop.keyFile changed but cannot be used; the previous key stays in force",
        ),
    });
  }

  function usableToken(): CachedToken | undefined {
    if (token && !isUsable(token, clock.now())) {
      const fields = { fingerprint: token.fingerprint, failures: consecutiveFailures };
      if (consecutiveFailures > 0) log.warn(fields, "token expired while refreshing kept failing");
      else log.debug(fields, "token expired");
      token = undefined;
    }
    return token;
  }

  function clearTimer(): void {
    if (timer !== undefined) clock.clearTimeout(timer);
    timer = undefined;
    nextAttemptAtMs = undefined;
  }

  function schedule(atMs: number): void {
    clearTimer();
    nextAttemptAtMs = atMs;
    timer = clock.setTimeout(onTimer, Math.max(0, atMs - clock.now()));
  }

  function onTimer(): void {
    timer = undefined;
    nextAttemptAtMs = undefined;
    // An unused token of a lazy source is left to lapse; the next use fetches again.
    if (options.idleRefresh === false && !usedSinceFetch && usableToken()) return;
    startFetch();
  }

  /** Fetch as soon as the min refresh interval allows; `cause`: the request that waits for it. */
  function requestFetch(cause?: TokenSpan): void {
    if (closed || inflight) return;
    const now = clock.now();
    const earliest =
      lastFetchStartMs === undefined ? now : lastFetchStartMs + policy.minRefreshIntervalMs;
    if (now >= earliest) startFetch(cause);
    else if (nextAttemptAtMs === undefined || nextAttemptAtMs > earliest) schedule(earliest);
  }

  /**
   * `cause`: a request's token wait — the fetch joins its trace. A timer refresh or a prefetch
   * has none and starts a trace of its own (waiters that come later link to it).
   */
  function startFetch(cause?: TokenSpan): void {
    if (closed || inflight) return;
    clearTimer();
    inflight = true;
    lastFetchStartMs = clock.now();
    fetchAbort = new AbortController();
    fetchCause = cause;
    fetchSpan = tracing.startTokenFetchSpan(options.upstream, {
      parent: cause,
      tokenUrl: spec.tokenUrl,
    });
    void runFetch(fetchAbort.signal, lastFetchStartMs, fetchSpan);
  }

  async function runFetch(signal: AbortSignal, startMs: number, span: TokenSpan): Promise<void> {
    let credentials: Credentials | undefined;
    let response: FetchedToken | undefined;
    let dpop: Dpop | undefined;
    let boundJkt: string | undefined;
    let failure: unknown;
    let sentAtMs = startMs;
    try {
      credentials = await reader.read();
      latestVersion = credentials.version;
      dpop = await dpopKey?.get();
      boundJkt = dpop?.jkt;
      // The lifetime counts from here, when the request goes out, not from when the fetch began:
      // reading the secret files and the DPoP key took 60–500 ms on a loaded two-core machine
      // (issue 32), time the token server never saw, and the token was dropped that much early.
      sentAtMs = clock.now();
      response = await fetchToken(credentials, signal, dpop);
    } catch (error) {
      failure = error;
    }
    inflight = false;
    fetchAbort = undefined;
    const error = response ? undefined : toTokenError(failure, where);
    span.end(error && ERROR_CODES[error.code]);
    if (fetchSpan === span) fetchSpan = fetchCause = undefined;
    if (closed) return;
    lastFetchDurationMs = clock.now() - startMs;
    lastFetchAtWallMs = clock.wallNow();
    // A token read from the shared cache was no token endpoint request: the fetch metrics and
    // fetchCount leave it out, so "one request per credential" can be checked across replicas.
    if (response?.sharedCache) {
      sharedCacheHits++;
      for (const upstream of labels) options.metrics?.tokenSharedCacheHitsTotal.inc({ upstream });
    } else {
      fetchCount++;
      for (const upstream of labels) {
        options.metrics?.tokenFetchDurationSeconds.observe(
          { upstream },
          lastFetchDurationMs / 1000,
        );
      }
    }
    if (response && credentials) {
      onSuccess(response, credentials.version, { startMs, sentAtMs }, dpop, boundJkt);
    } else onFailure(error ?? toTokenError(failure, where), credentials?.version);
  }

  /**
   * `at`: when the fetch began and when its request was sent; `dpop`: the key the request proved
   * possession of; `boundJkt`: its thumbprint then.
   */
  function onSuccess(
    response: FetchedToken,
    version: string,
    at: { startMs: number; sentAtMs: number },
    dpop: Dpop | undefined,
    boundJkt: string | undefined,
  ): void {
    if (!response.sharedCache) countFetch("success");
    consecutiveFailures = 0;
    lastError = undefined;
    if (version !== latestVersion) {
      log.info("secret rotated during a token request: fetching again with the new secret");
      requestFetch();
      return;
    }
    if (dpop !== undefined && dpop.jkt !== boundJkt) {
      log.info("DPoP key rotated during a token request: fetching again with the new key");
      requestFetch();
      return;
    }
    const now = clock.now();
    token = {
      ...planToken(response, {
        startMs: at.sentAtMs,
        nowMs: now,
        wallNowMs: clock.wallNow(),
        policy,
        random,
        credentialsVersion: version,
      }),
      // Bound to the key whenever one is configured: the token response was checked for it
      // (token-response.ts), and a shared token was stored under the key's thumbprint.
      tokenType: dpop ? "DPoP" : "Bearer",
      ...(dpop ? { dpop } : {}),
    };
    const { lifetimeMs, refreshAtMs } = token;
    const receivedAtWallMs = clock.wallNow();
    origin = {
      source: response.sharedCache ? "shared-cache" : "token-endpoint",
      receivedAtWallMs,
      issuedAtWallMs: response.sharedCache?.issuedAtWallMs ?? receivedAtWallMs,
    };
    usedSinceFetch = false;
    for (const upstream of labels) {
      options.metrics?.tokenExpiryTimestampSeconds.set({ upstream }, token.expiresAtWallMs / 1000);
    }
    logFetchSuccess(log, token, {
      response,
      origin,
      refreshInMs: refreshAtMs - now,
      durationMs: now - at.startMs,
      notesLogged,
    });
    const fresh = usableToken();
    if (fresh) {
      waiters.resolveAll(fresh);
      schedule(refreshAtMs);
    } else {
      log.warn({ lifetimeS: lifetimeMs / 1000 }, "token expired before it could be used");
      requestFetch();
    }
  }

  function onFailure(error: BearerProxyError, version: string | undefined): void {
    countFetch(error.code);
    consecutiveFailures++;
    failureCount++;
    lastError = error;
    lastErrorAtWallMs = clock.wallNow();
    const configFault = error.code === "BP_ERR_TOKEN_REJECTED";
    const now = clock.now();
    const delayMs = computeBackoffMs(policy, {
      attempt: consecutiveFailures,
      retryAfterSeconds: error.retryAfterSeconds,
      configFault,
      random,
    });
    // A secret that rotated while we asked deserves a prompt retry, not the backoff.
    const rotated = version !== undefined && version !== latestVersion;
    const atMs = Math.max(rotated ? now : now + delayMs, now + policy.minRefreshIntervalMs);
    schedule(atMs);
    logFetchFailure(log, error, {
      retryInS: round1((atMs - now) / 1000),
      servingCachedToken: usableToken() !== undefined,
      failures: consecutiveFailures,
    });
    // Re-read secret files before retrying: a rotation may be what the IdP is telling us about.
    if (configFault) void reader.check();
    if (!usableToken()) waiters.rejectExpiringBefore(atMs, () => noAvailableToken());
  }

  function onCredentialsChanged(credentials: Credentials): void {
    if (closed) return;
    latestVersion = credentials.version;
    const dropped = token !== undefined && token.credentialsVersion !== credentials.version;
    if (dropped) token = undefined;
    log.info({ droppedCachedToken: dropped }, "secret rotation picked up");
    afterRotation(dropped);
  }

  /** `dpop.keyFile` holds another key: the token is bound to the old one (RFC 9449 §6), drop it. */
  function onDpopKeyChanged(jkt: string): void {
    if (closed) return;
    const dropped = token !== undefined;
    token = undefined;
    log.info({ jkt, droppedCachedToken: dropped }, "DPoP key rotation picked up");
    afterRotation(dropped);
  }

  /**
   * After a rotation: fetch now when the token was dropped or fetches were failing (perhaps
   * because of the old secret or key), skipping any backoff; the min-age guard of `invalidate`
   * does not apply, the old token is known to be useless.
   */
  function afterRotation(dropped: boolean): void {
    if (inflight) return; // its result is checked against the latest secret and key when it lands
    if (dropped || consecutiveFailures > 0) {
      consecutiveFailures = 0;
      clearTimer();
      requestFetch();
    }
  }

  function countFetch(outcome: string): void {
    for (const upstream of labels) options.metrics?.tokenFetchesTotal.inc({ upstream, outcome });
  }

  function noAvailableToken(waitedMs?: number): BearerProxyError {
    const nowMs = clock.now();
    return unavailableError({
      upstream: options.upstream,
      where,
      lastError,
      closed,
      retryAfterSeconds: Math.ceil(((nextAttemptAtMs ?? nowMs) - nowMs) / 1000),
      waitedMs,
    });
  }

  function noteUse(current: CachedToken | undefined): void {
    usedSinceFetch = true;
    // A lazy source skipped its refresh while idle: refresh now that it is used again.
    if (current && !inflight && timer === undefined && clock.now() >= current.refreshAtMs) {
      requestFetch();
    }
  }

  return {
    getToken(signal?: AbortSignal, waiter?: TokenSpan): Promise<AccessToken> {
      if (closed) return Promise.reject(noAvailableToken());
      const current = usableToken();
      noteUse(current);
      if (current) return Promise.resolve(current);
      if (signal?.aborted) return Promise.reject(signal.reason);
      // A fetch already under way (a refresh, another request's): this wait links to it.
      if (inflight && fetchSpan && waiter && waiter !== fetchCause) waiter.addLink(fetchSpan);
      // Respect a pending backoff; otherwise make sure a fetch is coming.
      if (!inflight && (consecutiveFailures === 0 || timer === undefined)) requestFetch(waiter);
      const deadlineMs = clock.now() + policy.waitTimeoutMs;
      if (!inflight && nextAttemptAtMs !== undefined && nextAttemptAtMs > deadlineMs) {
        return Promise.reject(noAvailableToken());
      }
      return waiters.wait(policy.waitTimeoutMs, signal, () =>
        noAvailableToken(policy.waitTimeoutMs),
      );
    },
    peekToken() {
      if (closed) return undefined;
      const current = usableToken();
      noteUse(current);
      return current;
    },
    invalidate(stale: AccessToken, waiter?: TokenSpan): boolean {
      if (closed || !token || token.value !== stale.value) return false;
      const ageMs = clock.now() - token.obtainedAtMs;
      if (ageMs < policy.minAgeBeforeInvalidateMs) return false;
      log.info(
        { fingerprint: token.fingerprint, ageS: round1(ageMs / 1000) },
        "token invalidated after an upstream 401",
      );
      token = undefined;
      if (!inflight && (consecutiveFailures === 0 || timer === undefined)) requestFetch(waiter);
      return true;
    },
    start() {
      if (closed || token || inflight || timer !== undefined || lastError) return;
      startFetch();
    },
    status(): TokenStatus {
      const dpop = dpopKey?.current;
      const status = describeTokenStatus({
        closed,
        current: closed ? undefined : usableToken(),
        inflight,
        consecutiveFailures,
        lastError,
        lastErrorAtWallMs,
        lastFetchAtWallMs,
        lastFetchDurationMs,
        nextAttemptAtMs,
        clock,
        fetchCount,
        failureCount,
        sharedCacheHits,
        origin,
      });
      return dpop ? { ...status, dpop: { jkt: dpop.jkt, algorithm: dpop.algorithm } } : status;
    },
    close() {
      if (closed) return;
      closed = true;
      clearTimer();
      fetchAbort?.abort(new Error("token source closed"));
      unsubscribe();
      reader.close();
      dpopKey?.close();
      token = undefined;
      waiters.rejectAll(() => noAvailableToken());
    },
  };
}

function defaultFetch(options: TokenSourceOptions, clock: Clock) {
  const { dispatcher } = options;
  if (!dispatcher) throw new TypeError("createTokenSource needs a dispatcher or a fetchToken");
  return (credentials: ClientCredentials, signal: AbortSignal, dpop?: Dpop) =>
    requestToken(options.spec, credentials, {
      dispatcher,
      timeoutMs: options.policy.requestTimeoutMs,
      signal,
      wallNow: () => clock.wallNow(),
      dpop,
    });
}
