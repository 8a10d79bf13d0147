/**
 * The one place the request walk asks "may this caller use this upstream?" — after routing,
 * before the token is touched (Envoy's RBAC filter sits at the same point). It reads the TCP
 * peer and `Proxy-Authorization`, asks the authenticator who that is (a cached answer is
 * synchronous; bcrypt and JWKS are not), and lets `allow.ts` decide. Refusals become the error
 * contract: 407 `caller_unauthenticated` with the challenges clients expect, 403
 * `caller_not_allowed`, 429 `caller_throttled` after repeated bad credentials from one address,
 * 503 `caller_keys_unavailable` when a service-account token cannot be checked for want of the
 * cluster's keys, 503 `caller_checks_busy` when the process's password check queue is full
 * (neither is the caller's fault: no failure counted, no challenge).
 *
 * A verification counts as a failure of its address from the moment it starts until it ends
 * (failure-throttle.ts), and requests of one address that share a verification of the same
 * header count once: a burst from one address starts at most `maxFailures` verifications.
 *
 * The authenticator (bcrypt, jose) is loaded only when some upstream's rules name callers, so
 * a sidecar without `allow` loads neither.
 */
import type { IncomingMessage } from "node:http";
import { addressLabel, unmapIpv4 } from "../base/peer-address.js";
import type { CallersConfig, UpstreamConfig } from "../config/proxy-config.js";
import type { Metrics } from "../observability/metrics.js";
import { type AllowPolicy, compileAllowRules, decideAccess } from "./allow.js";
import type { CallerAuthenticator } from "./authenticate.js";
import type { Authentication } from "./caller-types.js";
import { callerLabel, isCallersFault } from "./caller-types.js";
import type { ConnectionProofs } from "./connection-proofs.js";
import type { DenialLog, DenyReason } from "./denial-log.js";
import type { FailureThrottle, VerificationRefusal } from "./failure-throttle.js";
import { JWKS_RETRY_AFTER_FAILURE_MS } from "./jwks-timing.js";

/** What the walk does with a request. */
export type GateVerdict =
  | { allowed: true; caller: string | undefined }
  | {
      allowed: false;
      code:
        | "caller_unauthenticated"
        | "caller_not_allowed"
        | "caller_throttled"
        | "caller_keys_unavailable"
        | "caller_checks_busy";
      message: string;
      /** `Proxy-Authenticate` challenges on a 407. */
      headers: Record<string, string | string[]> | undefined;
      retryAfterSeconds: number | undefined;
      /** Who was refused, for the access line (`addr:…` when nobody was identified). */
      caller: string;
    };

export interface CallerGate {
  /** The decision for a routed request: now, or once its credential is verified. Never rejects. */
  check(upstream: string, req: IncomingMessage): GateVerdict | Promise<GateVerdict>;
  /** Resolves once the authenticator (if any) is loaded; rejects when its files are unusable. */
  ready(): Promise<void>;
}

export interface CallerGateDeps {
  upstreams: readonly UpstreamConfig[];
  callers: CallersConfig;
  /** Loaded lazily by the app, shared across reloads while `callers` is unchanged. */
  authenticator: Promise<CallerAuthenticator> | undefined;
  throttle: FailureThrottle;
  /** Which credentials each connection proved (on the throttle's clock); shared across reloads. */
  proofs: ConnectionProofs;
  denials: DenialLog;
  metrics: Metrics;
}

const OPEN: GateVerdict = Object.freeze({ allowed: true, caller: undefined });
/** The soonest the cluster's keys can be back: the JWKS fetch is not retried before. */
const KEYS_RETRY_AFTER_SECONDS = Math.ceil(JWKS_RETRY_AFTER_FAILURE_MS / 1000);
/** A full check queue drains within about a second at the default limits. */
const CHECKS_BUSY_RETRY_AFTER_SECONDS = 1;

/** RFC 9110 §11.7.1 challenges; `realm` exactly as git and curl expect it. */
export function proxyChallenges(callers: CallersConfig): string[] {
  const challenges: string[] = [];
  if (callers.basic) challenges.push('Basic realm="bearer-proxy"');
  if (callers.kubernetes) challenges.push('Bearer realm="bearer-proxy"');
  // A rule list that names callers validated with one source at least; keep a Basic challenge
  // as the fallback so the answer is always a well-formed 407.
  return challenges.length > 0 ? challenges : ['Basic realm="bearer-proxy"'];
}

export function createCallerGate(deps: CallerGateDeps): CallerGate {
  return new AllowListGate(deps);
}

/** Turns what `allow.ts` decides into verdicts, counting and recording every refusal. */
class Verdicts {
  private readonly challenge: Record<string, string[]>;

  constructor(
    callers: CallersConfig,
    private readonly metrics: Metrics,
    private readonly denials: DenialLog,
  ) {
    this.challenge = { "proxy-authenticate": proxyChallenges(callers) };
  }

  decide(
    upstream: string,
    policy: AllowPolicy,
    peer: string,
    authentication: Authentication | undefined,
  ): GateVerdict {
    const decision = decideAccess(policy, peer, authentication);
    if (decision.outcome === "allow") return { allowed: true, caller: decision.label };
    const caller = authentication?.ok ? callerLabel(authentication.caller) : addressLabel(peer);
    if (decision.outcome === "busy") {
      return this.deny(upstream, "checks_busy", {
        code: "caller_checks_busy",
        message: decision.reason,
        headers: undefined,
        retryAfterSeconds: CHECKS_BUSY_RETRY_AFTER_SECONDS,
        caller,
      });
    }
    if (decision.outcome === "unavailable") {
      return this.deny(upstream, "keys_unavailable", {
        code: "caller_keys_unavailable",
        message: `${decision.reason}; retry later`,
        headers: undefined,
        retryAfterSeconds: KEYS_RETRY_AFTER_SECONDS,
        caller,
      });
    }
    if (decision.outcome === "unauthenticated") {
      return this.deny(upstream, authentication ? "invalid_credential" : "no_credential", {
        code: "caller_unauthenticated",
        message: `${decision.reason}; send Proxy-Authorization (e.g. http_proxy=http://user:password@host:port)`,
        headers: this.challenge,
        retryAfterSeconds: undefined,
        caller,
      });
    }
    return this.deny(upstream, "not_allowed", {
      code: "caller_not_allowed",
      message: decision.reason,
      headers: undefined,
      retryAfterSeconds: undefined,
      caller,
    });
  }

  throttled(upstream: string, peer: string, retryAfterSeconds: number): GateVerdict {
    return this.deny(upstream, "throttled", {
      code: "caller_throttled",
      message: "too many failed Proxy-Authorization attempts from this address; retry later",
      headers: undefined,
      retryAfterSeconds,
      caller: addressLabel(peer),
    });
  }

  private deny(
    upstream: string,
    reason: DenyReason,
    verdict: Omit<Extract<GateVerdict, { allowed: false }>, "allowed">,
  ): GateVerdict {
    this.metrics.callerDeniedTotal.inc({ upstream, reason });
    this.denials.record({ upstream, reason, caller: verdict.caller });
    return { allowed: false, ...verdict };
  }
}

/**
 * Verifying credentials: the authenticator (loaded lazily by the app), and the verifications
 * in flight, each counted as one failure of its address until it ends.
 */
class CountedVerifications {
  private authenticator: CallerAuthenticator | undefined;
  readonly loading: Promise<CallerAuthenticator> | undefined;
  /** `address key` → the verification that address started for that header. */
  private readonly counted = new Map<string, Promise<Authentication>>();

  constructor(
    authenticator: Promise<CallerAuthenticator> | undefined,
    private readonly throttle: FailureThrottle,
  ) {
    this.loading = authenticator?.then((loaded) => {
      this.authenticator = loaded;
      return loaded;
    });
    // A failed load surfaces through ready() (start and reload refuse); never as unhandled.
    this.loading?.catch(() => {});
  }

  /** A verification of `key` the authenticator has cached, if it is loaded and has one. */
  peek(key: string): Authentication | undefined {
    return this.authenticator?.peek(key);
  }

  /**
   * Verify `header` for `peer`, counted as one failure of the address until it ends; requests
   * of the same address with the same header join the verification in flight and count once.
   * A success does not forgive earlier failures: one valid account must not let an address keep
   * guessing others' passwords (the window ends them on its own). A failure that is not the
   * caller's (keys unavailable, checks busy) gives its count back, like a success.
   */
  verify(peer: string, header: string, key: string): Promise<Authentication> | VerificationRefusal {
    const joint = `${unmapIpv4(peer)} ${key}`;
    const shared = this.counted.get(joint);
    if (shared) return shared;
    const ticket = this.throttle.begin(peer);
    if (!ticket.admitted) return ticket;
    const verification = this.authenticate(header, key)
      .then((authentication) => {
        ticket.end(!authentication.ok && isCallersFault(authentication.reason));
        return authentication;
      })
      .finally(() => this.counted.delete(joint));
    this.counted.set(joint, verification);
    return verification;
  }

  private async authenticate(header: string, key: string): Promise<Authentication> {
    try {
      const loaded = this.authenticator ?? (await this.loading);
      return loaded
        ? await loaded.authenticate(header, key)
        : { ok: false, reason: "not_configured", message: "no callers source is configured" };
    } catch {
      return {
        ok: false,
        reason: "not_configured",
        message: "the caller's credential could not be verified",
      };
    }
  }
}

/** One upstream's compiled `allow` list, and the admissions it gave to cached credentials. */
interface UpstreamRules {
  policy: AllowPolicy;
  /**
   * A verified caller's admission depends on the caller and the rules alone (address rules
   * were looked at before the credential): the verdict is made once per cached credential and
   * goes with it when the cache drops it. Refusals are decided (and counted) every time.
   */
  admitted: WeakMap<Authentication, GateVerdict>;
}

/** The gate of one configuration: its upstreams' compiled `allow` lists. */
class AllowListGate implements CallerGate {
  private readonly rules = new Map<string, UpstreamRules>();
  private readonly verdicts: Verdicts;
  private readonly verifications: CountedVerifications;

  constructor(private readonly deps: CallerGateDeps) {
    for (const upstream of deps.upstreams) {
      if (upstream.allow) {
        const policy = compileAllowRules(upstream.allow);
        this.rules.set(upstream.name, { policy, admitted: new WeakMap() });
      }
    }
    this.verdicts = new Verdicts(deps.callers, deps.metrics, deps.denials);
    this.verifications = new CountedVerifications(deps.authenticator, deps.throttle);
  }

  check(upstream: string, req: IncomingMessage): GateVerdict | Promise<GateVerdict> {
    const rules = this.rules.get(upstream);
    if (!rules) return OPEN;
    const { policy } = rules;
    const { verdicts, verifications, deps } = this;
    const peer = req.socket.remoteAddress ?? "";
    // An address rule admits without a credential: nothing to verify, nothing to spend.
    if (policy.allowsAddress(peer)) return { allowed: true, caller: addressLabel(peer) };
    const header = req.headers["proxy-authorization"];
    if (header === undefined || !policy.needsCredential) {
      return verdicts.decide(upstream, policy, peer, undefined);
    }
    const key = deps.proofs.keyOf(req.socket, header);
    const block = deps.throttle.blockOf(peer);
    if (block) {
      // A blocked address gets nothing new, not even a credential someone else proved: else
      // the block would answer "right" fast for every password in the cache. Only a
      // connection that proved this very credential before the block began goes on with it,
      // so clients sharing the address keep their pooled connections.
      const kept = deps.proofs.provedBefore(req.socket, key, block.sinceMs)
        ? verifications.peek(key)
        : undefined;
      if (kept) return verdicts.decide(upstream, policy, peer, kept);
      return verdicts.throttled(upstream, peer, block.retryAfterSeconds);
    }
    const cached = verifications.peek(key);
    if (cached) {
      deps.proofs.remember(req.socket, key);
      const admitted = rules.admitted.get(cached);
      if (admitted !== undefined) return admitted;
      const verdict = verdicts.decide(upstream, policy, peer, cached);
      if (verdict.allowed) rules.admitted.set(cached, Object.freeze(verdict));
      return verdict;
    }
    const pending = verifications.verify(peer, header, key);
    if (!(pending instanceof Promise)) {
      return verdicts.throttled(upstream, peer, pending.retryAfterSeconds);
    }
    return this.verifyThenDecide(upstream, policy, req, peer, pending, key);
  }

  async ready(): Promise<void> {
    await this.verifications.loading;
  }

  private async verifyThenDecide(
    upstream: string,
    policy: AllowPolicy,
    req: IncomingMessage,
    peer: string,
    pending: Promise<Authentication>,
    key: string,
  ): Promise<GateVerdict> {
    const authentication = await pending;
    if (authentication.ok) this.deps.proofs.remember(req.socket, key);
    return this.verdicts.decide(upstream, policy, peer, authentication);
  }
}
