/**
 * All token sources of an app, one per distinct credential (upstreams with the same credential
 * share one), in a bounded LRU: an evicted source is closed (its timers stop) and recreated on
 * next use. Small configurations prefetch every token at start; large gateways fetch lazily.
 */
import { LRUCache } from "lru-cache";
import type { Logger } from "pino";
import type { Dispatcher } from "undici";
import type { SecretSource, UpstreamConfig } from "../config/types.js";
import { BearerProxyError } from "../errors.js";
import type { Metrics } from "../observability/metrics.js";
import { type Clock, systemClock } from "./clock.js";
import { hashValue } from "./fingerprint.js";
import { createTokenSource, type TokenSourceOptions } from "./token-source.js";
import { emptyTokenStatus } from "./token-status.js";
import type { AccessToken, TokenProvider, TokenStatus } from "./types.js";

export interface TokenRegistryOptions {
  upstreams: readonly UpstreamConfig[];
  /** Most sources alive at once (config tokenCache.maxSources). */
  maxSources: number;
  /** Prefetch at start only when there are at most this many credentials. */
  eagerLimit: number;
  /** The dispatcher for an upstream's token endpoint (same TLS settings as the upstream). */
  dispatcherFor(upstream: UpstreamConfig): Dispatcher;
  clock?: Clock;
  logger: Logger;
  metrics?: Metrics | undefined;
  /** Replaces createTokenSource (tests, a shared Redis-backed source). */
  createSource?: (options: TokenSourceOptions) => TokenProvider;
}

export interface TokenRegistry {
  /**
   * A stable provider for the named upstream. It resolves the shared source on every call, so
   * an evicted source comes back on next use. Its close() does nothing; close the registry.
   */
  forUpstream(name: string): TokenProvider;
  /** Prefetch every credential's token when there are at most eagerLimit of them. */
  startEager(): void;
  /** Status per upstream name (sources not alive report "idle"). */
  statuses(): Map<string, TokenStatus>;
  /** Number of distinct credentials in the configuration. */
  readonly credentialCount: number;
  /** True when tokens are prefetched at start (credentials ≤ eagerLimit), false when lazy. */
  readonly eager: boolean;
  close(): void;
}

interface CredentialGroup {
  key: string;
  upstreams: UpstreamConfig[];
}

/** The registry; sources are created on first use (or by `startEager`). */
export function createTokenRegistry(options: TokenRegistryOptions): TokenRegistry {
  const clock = options.clock ?? systemClock;
  const create = options.createSource ?? createTokenSource;
  const groups = new Map<string, CredentialGroup>();
  const groupOf = new Map<string, CredentialGroup>();
  for (const upstream of options.upstreams) {
    const key = credentialKey(upstream);
    let group = groups.get(key);
    if (!group) {
      group = { key, upstreams: [] };
      groups.set(key, group);
    }
    group.upstreams.push(upstream);
    groupOf.set(upstream.name, group);
  }
  const eager = groups.size <= Math.min(options.eagerLimit, options.maxSources);
  const cache = new LRUCache<string, TokenProvider>({
    max: options.maxSources,
    dispose: (source) => source.close(),
  });
  const facades = new Map<string, TokenProvider>();
  let closed = false;

  function sourceFor(group: CredentialGroup): TokenProvider {
    const existing = cache.get(group.key);
    if (existing) return existing;
    const first = group.upstreams[0]!;
    const source = create({
      upstream: first.name,
      upstreams: group.upstreams.map((u) => u.name),
      spec: first.token,
      policy: first.tokenPolicy,
      dispatcher: options.dispatcherFor(first),
      clock,
      logger: options.logger,
      metrics: options.metrics,
      idleRefresh: eager,
    });
    cache.set(group.key, source);
    return source;
  }

  function closedError(name: string): BearerProxyError {
    return new BearerProxyError(
      "BP_ERR_TOKEN_UNAVAILABLE",
      `no token for upstream ${name}: shutting down`,
      {
        upstream: name,
        retryAfterSeconds: 1,
      },
    );
  }

  function facadeFor(name: string, group: CredentialGroup): TokenProvider {
    return {
      getToken(signal?: AbortSignal): Promise<AccessToken> {
        if (closed) return Promise.reject(closedError(name));
        return sourceFor(group).getToken(signal);
      },
      peekToken: () => (closed ? undefined : sourceFor(group).peekToken()),
      invalidate: (token) => cache.peek(group.key)?.invalidate(token) ?? false,
      start() {
        if (!closed) sourceFor(group).start();
      },
      status: () => cache.peek(group.key)?.status() ?? emptyTokenStatus(closed ? "closed" : "idle"),
      close() {},
    };
  }

  return {
    forUpstream(name) {
      const group = groupOf.get(name);
      if (!group) throw new Error(`no upstream named ${JSON.stringify(name)}`);
      let facade = facades.get(name);
      if (!facade) {
        facade = facadeFor(name, group);
        facades.set(name, facade);
      }
      return facade;
    },
    startEager() {
      if (closed || !eager) return;
      for (const group of groups.values()) {
        if (group.upstreams.some((u) => u.tokenPolicy.prefetch)) sourceFor(group).start();
      }
    },
    statuses() {
      const result = new Map<string, TokenStatus>();
      for (const [name, group] of groupOf) {
        result.set(
          name,
          cache.peek(group.key)?.status() ?? emptyTokenStatus(closed ? "closed" : "idle"),
        );
      }
      return result;
    },
    credentialCount: groups.size,
    eager,
    close() {
      if (closed) return;
      closed = true;
      cache.clear();
    },
  };
}

/**
 * Everything that decides which token a request gets, and how it is managed. Inline secrets
 * are hashed so the key never holds one.
 */
export function credentialKey(upstream: UpstreamConfig): string {
  const spec = upstream.token;
  return JSON.stringify([
    spec.tokenUrl,
    sourceKey(spec.clientId),
    sourceKey(spec.clientSecret),
    spec.scope ?? null,
    spec.versionHeader ?? null,
    sorted(spec.extraParams),
    sorted(spec.extraHeaders),
    spec.format,
    spec.clientAuth,
    // Until the key is derived from the whole spec: the client-auth settings (issue 16).
    [spec.basicEncoding, spec.privateKeyJwt ?? null, spec.clientAssertionFile ?? null],
    spec.tls,
    spec.allowInsecureHttp,
    upstream.tokenPolicy,
  ]);
}

function sourceKey(source: SecretSource | undefined): string | null {
  if (source === undefined) return null;
  return source.kind === "file" ? `file:${source.path}` : `inline:${hashValue(source.value)}`;
}

function sorted(record: Readonly<Record<string, string>>): [string, string][] {
  return Object.entries(record).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}
