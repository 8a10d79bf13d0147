/**
 * All token sources of an app, one per distinct credential (upstreams with the same credential
 * share one), in a bounded LRU: an evicted source is closed (its timers stop) and recreated on
 * next use. The first `eagerLimit` credentials (config order) prefetch their token at start, the
 * rest fetch on first use; an upstream's explicit `token.prefetch` wins either way.
 */
import { LRUCache } from "lru-cache";
import type { Logger } from "pino";
import type { Dispatcher } from "undici";
import { type Clock, systemClock } from "../base/clock.js";
import { localCredentialKey } from "../config/credential-identity.js";
import type { UpstreamConfig } from "../config/proxy-config.js";
import { BearerProxyError } from "../errors.js";
import type { Metrics } from "../observability/metrics.js";
import type { TokenSpan, Tracing } from "../observability/tracing.js";
import type { AccessToken, TokenProvider, TokenStatus } from "./token-provider.js";
import { createTokenSource, type TokenSourceOptions } from "./token-source.js";
import { emptyTokenStatus } from "./token-status.js";

// Sources not alive share one frozen status each: /status reads 10,000 of them per refresh.
const IDLE_STATUS: TokenStatus = Object.freeze(emptyTokenStatus("idle"));
const CLOSED_STATUS: TokenStatus = Object.freeze(emptyTokenStatus("closed"));

export interface TokenRegistryOptions {
  upstreams: readonly UpstreamConfig[];
  /** Most sources alive at once (config tokenCache.maxSources). */
  maxSources: number;
  /** Credentials prefetched at start by default (config order); beyond, lazy. */
  eagerLimit: number;
  /** The dispatcher for an upstream's token endpoint (same TLS settings as the upstream). */
  dispatcherFor(upstream: UpstreamConfig): Dispatcher;
  clock?: Clock;
  logger: Logger;
  metrics?: Metrics | undefined;
  /** Replaces createTokenSource (tests, a shared Redis-backed source). */
  createSource?: (options: TokenSourceOptions) => TokenProvider;
  /** Token fetch spans; default: off. */
  tracing?: Tracing | undefined;
  /**
   * The registry of the configuration being replaced (a reload): its live sources whose
   * credential key is unchanged move here with their token and schedule, so a reload causes no
   * token request for an untouched credential.
   */
  adoptFrom?: TokenRegistry | undefined;
}

export interface TokenRegistry {
  /**
   * A stable provider for the named upstream. It resolves the shared source on every call, so
   * an evicted source comes back on next use. Its close() does nothing; close the registry.
   */
  forUpstream(name: string): TokenProvider;
  /** Start the first fetch of every credential whose mode is "prefetch". */
  startEager(): void;
  /** Status per upstream name (sources not alive report "idle"). */
  statuses(): Map<string, TokenStatus>;
  /** Number of distinct credentials in the configuration. */
  readonly credentialCount: number;
  /** How the named upstream's credential gets its first token, and why (for /status). */
  modeOf(name: string): TokenMode;
  /** Number of credentials prefetched at start. */
  readonly prefetchCount: number;
  /**
   * Give the live source of credential `key` (see `localCredentialKey`) to a new registry: it
   * leaves this one without being closed, and this registry's providers use it from now on
   * (requests still running on the old configuration). Undefined when none is alive.
   */
  handOver(key: string): TokenProvider | undefined;
  /** Close every source this registry still owns (handed-over ones are not). */
  close(): void;
}

/** A credential's token mode as decided at start. */
export interface TokenMode {
  mode: "prefetch" | "lazy";
  /** "token.prefetch": set on the upstream; "eagerLimit": within or beyond tokenCache.eagerLimit. */
  decidedBy: "token.prefetch" | "eagerLimit";
}

interface CredentialGroup {
  key: string;
  upstreams: UpstreamConfig[];
  mode: TokenMode;
}

/**
 * Decide each credential's mode in config order: an explicit `token.prefetch` wins; the others
 * prefetch while the budget (eagerLimit, at most maxSources so none is evicted at once) lasts.
 */
function assignModes(groups: Iterable<CredentialGroup>, budget: number): number {
  let prefetched = 0;
  let defaulted = 0;
  for (const group of groups) {
    const policies = group.upstreams.map((u) => u.tokenPolicy);
    if (policies.some((p) => p.prefetchExplicit && p.prefetch)) {
      group.mode = { mode: "prefetch", decidedBy: "token.prefetch" };
    } else if (policies.every((p) => p.prefetchExplicit || !p.prefetch)) {
      group.mode = { mode: "lazy", decidedBy: "token.prefetch" };
    } else {
      const within = defaulted < budget;
      if (within) defaulted++;
      group.mode = { mode: within ? "prefetch" : "lazy", decidedBy: "eagerLimit" };
    }
    if (group.mode.mode === "prefetch") prefetched++;
  }
  return prefetched;
}

/** The registry; sources are created on first use (or by `startEager`). */
export function createTokenRegistry(options: TokenRegistryOptions): TokenRegistry {
  const clock = options.clock ?? systemClock;
  const create = options.createSource ?? createTokenSource;
  const groups = new Map<string, CredentialGroup>();
  const groupOf = new Map<string, CredentialGroup>();
  for (const upstream of options.upstreams) {
    const key = localCredentialKey(upstream);
    let group = groups.get(key);
    if (!group) {
      group = { key, upstreams: [], mode: { mode: "lazy", decidedBy: "eagerLimit" } };
      groups.set(key, group);
    }
    group.upstreams.push(upstream);
    groupOf.set(upstream.name, group);
  }
  const prefetchCount = assignModes(
    groups.values(),
    Math.min(options.eagerLimit, options.maxSources),
  );
  // Sources handed to a reload's new registry: leaving this cache must not close them.
  const handedOver = new Map<string, TokenProvider>();
  const cache = new LRUCache<string, TokenProvider>({
    // Never more than the configuration's credentials: lru-cache allocates every slot up front
    // (~440 KiB for the default 20,000), which a one-credential sidecar would hold for nothing.
    max: Math.max(1, Math.min(options.maxSources, groups.size)),
    dispose: (source, key) => {
      if (handedOver.get(key) !== source) source.close();
    },
  });
  if (options.adoptFrom) {
    for (const key of groups.keys()) {
      const adopted = options.adoptFrom.handOver(key);
      if (adopted) cache.set(key, adopted);
    }
  }
  const facades = new Map<string, TokenProvider>();
  let closed = false;

  function sourceFor(group: CredentialGroup): TokenProvider {
    const existing = handedOver.get(group.key) ?? cache.get(group.key);
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
      tracing: options.tracing,
      // An unused token of a lazy credential is left to lapse rather than refreshed forever.
      idleRefresh: group.mode.mode === "prefetch",
    });
    cache.set(group.key, source);
    return source;
  }

  const peek = (key: string) => handedOver.get(key) ?? cache.peek(key);

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
      getToken(signal?: AbortSignal, waiter?: TokenSpan): Promise<AccessToken> {
        if (closed) return Promise.reject(closedError(name));
        return sourceFor(group).getToken(signal, waiter);
      },
      peekToken: () => (closed ? undefined : sourceFor(group).peekToken()),
      invalidate: (token, waiter) => peek(group.key)?.invalidate(token, waiter) ?? false,
      start() {
        if (!closed) sourceFor(group).start();
      },
      status: () => peek(group.key)?.status() ?? (closed ? CLOSED_STATUS : IDLE_STATUS),
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
      if (closed) return;
      for (const group of groups.values()) {
        if (group.mode.mode === "prefetch") sourceFor(group).start();
      }
    },
    modeOf(name) {
      const group = groupOf.get(name);
      if (!group) throw new Error(`no upstream named ${JSON.stringify(name)}`);
      return group.mode;
    },
    statuses() {
      const result = new Map<string, TokenStatus>();
      for (const [name, group] of groupOf) {
        result.set(name, peek(group.key)?.status() ?? (closed ? CLOSED_STATUS : IDLE_STATUS));
      }
      return result;
    },
    credentialCount: groups.size,
    prefetchCount,
    handOver(key) {
      const source = cache.peek(key);
      if (closed || !source) return undefined;
      handedOver.set(key, source);
      cache.delete(key);
      return source;
    },
    close() {
      if (closed) return;
      closed = true;
      cache.clear();
    },
  };
}
