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
import { FetchCounters } from "./fetch-counters.js";
import { RefreshTimer } from "./refresh-timer.js";
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
import { createWaiterSet, type WaiterSet } from "./waiters.js";

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
  return new TokenSource(options);
}

/**
 * The source's parts: the refresh timer schedules (refresh-timer.ts), the waiter set answers
 * requests while no token is usable (waiters.ts), the counters count (fetch-counters.ts); the
 * source fetches, stores and decides when to fetch next.
 */
export class TokenSource implements TokenProvider {
  private readonly spec: TokenEndpointSpec;
  private readonly policy: TokenPolicy;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly log: Logger;
  private readonly where: string;
  private readonly reader: CredentialReader;
  private readonly fetchToken: NonNullable<TokenSourceOptions["fetchToken"]>;
  private readonly waiters: WaiterSet;
  private readonly tracing: Tracing;
  private readonly counters: FetchCounters;
  private readonly refresh: RefreshTimer;
  private readonly unsubscribe: () => void;
  private readonly dpopKey: LazyDpop | undefined;
  /** Response notes already warned about (once per source). */
  private readonly notesLogged = new Set<string>();

  private token: CachedToken | undefined;
  private usedSinceFetch = false;
  private inflight = false;
  /** The span of the fetch in flight, for waiters that did not start it to link to. */
  private fetchSpan: TokenSpan | undefined;
  /** The wait that started the current fetch (its parent): it needs no link to its own child. */
  private fetchCause: TokenSpan | undefined;
  private fetchAbort: AbortController | undefined;
  private lastFetchStartMs: number | undefined;
  private latestVersion: string | undefined;
  private consecutiveFailures = 0;
  private lastError: BearerProxyError | undefined;
  private lastErrorAtWallMs: number | undefined;
  private lastFetchAtWallMs: number | undefined;
  private lastFetchDurationMs: number | undefined;
  /** Where the current `token` came from. */
  private origin: TokenOriginStatus | undefined;
  private closed = false;

  constructor(private readonly options: TokenSourceOptions) {
    this.spec = options.spec;
    this.policy = options.policy;
    this.clock = options.clock ?? systemClock;
    this.random = options.random ?? Math.random;
    this.log = options.logger.child({ component: "token", upstream: options.upstream });
    this.where = describeTokenUrl(this.spec.tokenUrl);
    this.reader =
      options.credentialReader ??
      createCredentialReader(this.spec, {
        clock: this.clock,
        pollIntervalMs: options.secretPollIntervalMs,
      });
    this.fetchToken = options.fetchToken ?? defaultFetch(options, this.clock);
    this.waiters = createWaiterSet(this.clock);
    this.tracing = options.tracing ?? NOOP_TRACING;
    this.counters = new FetchCounters(options.upstreams ?? [options.upstream], options.metrics);
    this.refresh = new RefreshTimer(this.clock, () => this.onTimer());
    this.unsubscribe = this.reader.onChange((credentials) =>
      this.onCredentialsChanged(credentials),
    );
    this.dpopKey = this.spec.dpop === undefined ? undefined : this.createDpop(this.spec.dpop);
  }

  getToken(signal?: AbortSignal, waiter?: TokenSpan): Promise<AccessToken> {
    if (this.closed) return Promise.reject(this.noAvailableToken());
    const current = this.usableToken();
    this.noteUse(current);
    if (current) return Promise.resolve(current);
    if (signal?.aborted) return Promise.reject(signal.reason);
    // A fetch already under way (a refresh, another request's): this wait links to it.
    if (this.inflight && this.fetchSpan && waiter && waiter !== this.fetchCause) {
      waiter.addLink(this.fetchSpan);
    }
    // Respect a pending backoff; otherwise make sure a fetch is coming.
    if (!this.inflight && (this.consecutiveFailures === 0 || !this.refresh.pending)) {
      this.requestFetch(waiter);
    }
    const { waitTimeoutMs } = this.policy;
    const deadlineMs = this.clock.now() + waitTimeoutMs;
    const nextAttemptAtMs = this.refresh.nextAttemptAtMs;
    if (!this.inflight && nextAttemptAtMs !== undefined && nextAttemptAtMs > deadlineMs) {
      return Promise.reject(this.noAvailableToken());
    }
    return this.waiters.wait(waitTimeoutMs, signal, () => this.noAvailableToken(waitTimeoutMs));
  }

  peekToken(): AccessToken | undefined {
    if (this.closed) return undefined;
    const current = this.usableToken();
    this.noteUse(current);
    return current;
  }

  invalidate(stale: AccessToken, waiter?: TokenSpan): boolean {
    const { token } = this;
    if (this.closed || !token || token.value !== stale.value) return false;
    const ageMs = this.clock.now() - token.obtainedAtMs;
    if (ageMs < this.policy.minAgeBeforeInvalidateMs) return false;
    this.log.info(
      { fingerprint: token.fingerprint, ageS: round1(ageMs / 1000) },
      "token invalidated after an upstream 401",
    );
    this.token = undefined;
    if (!this.inflight && (this.consecutiveFailures === 0 || !this.refresh.pending)) {
      this.requestFetch(waiter);
    }
    return true;
  }

  start(): void {
    if (this.closed || this.token || this.inflight || this.refresh.pending || this.lastError) {
      return;
    }
    this.startFetch();
  }

  status(): TokenStatus {
    const dpop = this.dpopKey?.current;
    const status = describeTokenStatus({
      closed: this.closed,
      current: this.closed ? undefined : this.usableToken(),
      inflight: this.inflight,
      consecutiveFailures: this.consecutiveFailures,
      lastError: this.lastError,
      lastErrorAtWallMs: this.lastErrorAtWallMs,
      lastFetchAtWallMs: this.lastFetchAtWallMs,
      lastFetchDurationMs: this.lastFetchDurationMs,
      nextAttemptAtMs: this.refresh.nextAttemptAtMs,
      clock: this.clock,
      fetchCount: this.counters.fetchCount,
      failureCount: this.counters.failureCount,
      sharedCacheHits: this.counters.sharedCacheHits,
      origin: this.origin,
    });
    return dpop ? { ...status, dpop: { jkt: dpop.jkt, algorithm: dpop.algorithm } } : status;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.refresh.clear();
    this.fetchAbort?.abort(new Error("token source closed"));
    this.unsubscribe();
    this.reader.close();
    this.dpopKey?.close();
    this.token = undefined;
    this.waiters.rejectAll(() => this.noAvailableToken());
  }

  private createDpop(dpopSpec: NonNullable<TokenEndpointSpec["dpop"]>): LazyDpop {
    return createLazyDpop(dpopSpec, {
      clock: this.clock,
      pollIntervalMs: this.options.secretPollIntervalMs,
      onLoad: (dpop) => this.log.info({ dpop: dpop.describe() }, "DPoP key loaded"),
      onKeyChange: (jkt) => this.onDpopKeyChanged(jkt),
      onKeyReloadError: (error) =>
        this.log.warn(
          { code: error.code, reason: error.message },
          "dpop.keyFile changed but cannot be used; the previous key stays in force",
        ),
    });
  }

  private usableToken(): CachedToken | undefined {
    const { token } = this;
    if (token && !isUsable(token, this.clock.now())) {
      const fields = { fingerprint: token.fingerprint, failures: this.consecutiveFailures };
      if (this.consecutiveFailures > 0) {
        this.log.warn(fields, "token expired while refreshing kept failing");
      } else this.log.debug(fields, "token expired");
      this.token = undefined;
    }
    return this.token;
  }

  private onTimer(): void {
    // An unused token of a lazy source is left to lapse; the next use fetches again.
    if (this.options.idleRefresh === false && !this.usedSinceFetch && this.usableToken()) return;
    this.startFetch();
  }

  /** Fetch as soon as the min refresh interval allows; `cause`: the request that waits for it. */
  private requestFetch(cause?: TokenSpan): void {
    if (this.closed || this.inflight) return;
    const now = this.clock.now();
    const earliest =
      this.lastFetchStartMs === undefined
        ? now
        : this.lastFetchStartMs + this.policy.minRefreshIntervalMs;
    const nextAttemptAtMs = this.refresh.nextAttemptAtMs;
    if (now >= earliest) this.startFetch(cause);
    else if (nextAttemptAtMs === undefined || nextAttemptAtMs > earliest) {
      this.refresh.schedule(earliest);
    }
  }

  /**
   * `cause`: a request's token wait — the fetch joins its trace. A timer refresh or a prefetch
   * has none and starts a trace of its own (waiters that come later link to it).
   */
  private startFetch(cause?: TokenSpan): void {
    if (this.closed || this.inflight) return;
    this.refresh.clear();
    this.inflight = true;
    const startMs = this.clock.now();
    this.lastFetchStartMs = startMs;
    this.fetchAbort = new AbortController();
    this.fetchCause = cause;
    const span = this.tracing.startTokenFetchSpan(this.options.upstream, {
      parent: cause,
      tokenUrl: this.spec.tokenUrl,
    });
    this.fetchSpan = span;
    void this.runFetch(this.fetchAbort.signal, startMs, span);
  }

  private async runFetch(signal: AbortSignal, startMs: number, span: TokenSpan): Promise<void> {
    let credentials: Credentials | undefined;
    let response: FetchedToken | undefined;
    let dpop: Dpop | undefined;
    let boundJkt: string | undefined;
    let failure: unknown;
    let sentAtMs = startMs;
    try {
      credentials = await this.reader.read();
      this.latestVersion = credentials.version;
      dpop = await this.dpopKey?.get();
      boundJkt = dpop?.jkt;
      // The lifetime counts from here, when the request goes out, not from when the fetch began:
      // reading the secret files and the DPoP key took 60–500 ms on a loaded two-core machine
      // (issue 32), time the token server never saw, and the token was dropped that much early.
      sentAtMs = this.clock.now();
      response = await this.fetchToken(credentials, signal, dpop);
    } catch (error) {
      failure = error;
    }
    this.inflight = false;
    this.fetchAbort = undefined;
    const error = response ? undefined : toTokenError(failure, this.where);
    span.end(error && ERROR_CODES[error.code]);
    if (this.fetchSpan === span) this.fetchSpan = this.fetchCause = undefined;
    if (this.closed) return;
    this.lastFetchDurationMs = this.clock.now() - startMs;
    this.lastFetchAtWallMs = this.clock.wallNow();
    this.counters.ended(this.lastFetchDurationMs, response?.sharedCache !== undefined);
    if (response && credentials) {
      this.onSuccess(response, credentials.version, { startMs, sentAtMs }, dpop, boundJkt);
    } else this.onFailure(error ?? toTokenError(failure, this.where), credentials?.version);
  }

  /**
   * `at`: when the fetch began and when its request was sent; `dpop`: the key the request proved
   * possession of; `boundJkt`: its thumbprint then.
   */
  private onSuccess(
    response: FetchedToken,
    version: string,
    at: { startMs: number; sentAtMs: number },
    dpop: Dpop | undefined,
    boundJkt: string | undefined,
  ): void {
    if (!response.sharedCache) this.counters.outcome("success");
    this.consecutiveFailures = 0;
    this.lastError = undefined;
    if (version !== this.latestVersion) {
      this.log.info("secret rotated during a token request: fetching again with the new secret");
      this.requestFetch();
      return;
    }
    if (dpop !== undefined && dpop.jkt !== boundJkt) {
      this.log.info("DPoP key rotated during a token request: fetching again with the new key");
      this.requestFetch();
      return;
    }
    const now = this.clock.now();
    const token: CachedToken = {
      ...planToken(response, {
        startMs: at.sentAtMs,
        nowMs: now,
        wallNowMs: this.clock.wallNow(),
        policy: this.policy,
        random: this.random,
        credentialsVersion: version,
      }),
      // Bound to the key whenever one is configured: the token response was checked for it
      // (token-response.ts), and a shared token was stored under the key's thumbprint.
      tokenType: dpop ? "DPoP" : "Bearer",
      ...(dpop ? { dpop } : {}),
    };
    this.token = token;
    const receivedAtWallMs = this.clock.wallNow();
    this.origin = {
      source: response.sharedCache ? "shared-cache" : "token-endpoint",
      receivedAtWallMs,
      issuedAtWallMs: response.sharedCache?.issuedAtWallMs ?? receivedAtWallMs,
    };
    this.usedSinceFetch = false;
    this.counters.expiresAt(token.expiresAtWallMs);
    logFetchSuccess(this.log, token, {
      response,
      origin: this.origin,
      refreshInMs: token.refreshAtMs - now,
      durationMs: now - at.startMs,
      notesLogged: this.notesLogged,
    });
    const fresh = this.usableToken();
    if (fresh) {
      this.waiters.resolveAll(fresh);
      this.refresh.schedule(token.refreshAtMs);
    } else {
      this.log.warn(
        { lifetimeS: token.lifetimeMs / 1000 },
        "token expired before it could be used",
      );
      this.requestFetch();
    }
  }

  private onFailure(error: BearerProxyError, version: string | undefined): void {
    this.counters.failed(error.code);
    this.consecutiveFailures++;
    this.lastError = error;
    this.lastErrorAtWallMs = this.clock.wallNow();
    const configFault = error.code === "BP_ERR_TOKEN_REJECTED";
    const now = this.clock.now();
    const delayMs = computeBackoffMs(this.policy, {
      attempt: this.consecutiveFailures,
      retryAfterSeconds: error.retryAfterSeconds,
      configFault,
      random: this.random,
    });
    // A secret that rotated while we asked deserves a prompt retry, not the backoff.
    const rotated = version !== undefined && version !== this.latestVersion;
    const atMs = Math.max(rotated ? now : now + delayMs, now + this.policy.minRefreshIntervalMs);
    this.refresh.schedule(atMs);
    logFetchFailure(this.log, error, {
      retryInS: round1((atMs - now) / 1000),
      servingCachedToken: this.usableToken() !== undefined,
      failures: this.consecutiveFailures,
    });
    // Re-read secret files before retrying: a rotation may be what the IdP is telling us about.
    if (configFault) void this.reader.check();
    if (!this.usableToken()) {
      this.waiters.rejectExpiringBefore(atMs, () => this.noAvailableToken());
    }
  }

  private onCredentialsChanged(credentials: Credentials): void {
    if (this.closed) return;
    this.latestVersion = credentials.version;
    const dropped =
      this.token !== undefined && this.token.credentialsVersion !== credentials.version;
    if (dropped) this.token = undefined;
    this.log.info({ droppedCachedToken: dropped }, "secret rotation picked up");
    this.afterRotation(dropped);
  }

  /** `dpop.keyFile` holds another key: the token is bound to the old one (RFC 9449 §6), drop it. */
  private onDpopKeyChanged(jkt: string): void {
    if (this.closed) return;
    const dropped = this.token !== undefined;
    this.token = undefined;
    this.log.info({ jkt, droppedCachedToken: dropped }, "DPoP key rotation picked up");
    this.afterRotation(dropped);
  }

  /**
   * After a rotation: fetch now when the token was dropped or fetches were failing (perhaps
   * because of the old secret or key), skipping any backoff; the min-age guard of `invalidate`
   * does not apply, the old token is known to be useless.
   */
  private afterRotation(dropped: boolean): void {
    if (this.inflight) return; // its result is checked against the latest secret and key when it lands
    if (dropped || this.consecutiveFailures > 0) {
      this.consecutiveFailures = 0;
      this.refresh.clear();
      this.requestFetch();
    }
  }

  private noAvailableToken(waitedMs?: number): BearerProxyError {
    const nowMs = this.clock.now();
    return unavailableError({
      upstream: this.options.upstream,
      where: this.where,
      lastError: this.lastError,
      closed: this.closed,
      retryAfterSeconds: Math.ceil(((this.refresh.nextAttemptAtMs ?? nowMs) - nowMs) / 1000),
      waitedMs,
    });
  }

  private noteUse(current: CachedToken | undefined): void {
    this.usedSinceFetch = true;
    // A lazy source skipped its refresh while idle: refresh now that it is used again.
    if (
      current &&
      !this.inflight &&
      !this.refresh.pending &&
      this.clock.now() >= current.refreshAtMs
    ) {
      this.requestFetch();
    }
  }
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
