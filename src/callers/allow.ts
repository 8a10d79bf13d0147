/**
 * `upstreams[].allow`: the policy half of caller authorization (Envoy RBAC / Istio
 * AuthorizationPolicy keep principals apart from the rules that match them). Rules are ORed; a
 * `cidr` rule matches the TCP peer, the others a verified `Caller`. `decideAccess` is the one
 * place that turns a peer and an authentication into allow / 407 / 403 / 503.
 */
import { BlockList } from "node:net";
import { parseCidr } from "../base/cidr.js";
import { addressLabel, unmapIpv4 } from "../base/peer-address.js";
import { type AllowRule, type Authentication, type Caller, callerLabel } from "./caller-types.js";

/**
 * True when some rule names callers (user, serviceAccount, namespace), not only addresses:
 * such a list needs the authenticator, and a request without a credential gets a 407.
 */
export function rulesNameCallers(rules: readonly AllowRule[] | undefined): boolean {
  return rules?.some((rule) => !("cidr" in rule)) ?? false;
}

/** One rule in short form for logs and /status: `cidr 10.12.0.0/16`, `user x`, `sa ns/*`. */
export function summarizeAllowRule(rule: AllowRule): string {
  if ("cidr" in rule) return `cidr ${rule.cidr.trim()}`;
  if ("user" in rule) return `user ${rule.user}`;
  if ("serviceAccount" in rule) return `sa ${rule.serviceAccount}`;
  return `sa ${rule.namespace}/*`;
}

/** A compiled `allow` list. */
export interface AllowPolicy {
  /** Whether any rule names callers (user, serviceAccount, namespace): a 407 can help. */
  readonly needsCredential: boolean;
  /** Whether a `cidr` rule matches the TCP peer (IPv4-mapped IPv6 peers match IPv4 rules). */
  allowsAddress(ip: string): boolean;
  /** Whether a user, serviceAccount or namespace rule matches the caller. */
  allowsCaller(caller: Caller): boolean;
  /** The rules in short form for logs and status: `cidr 10.12.0.0/16`, `user x`, `sa ns/*`. */
  readonly summary: readonly string[];
}

/** A `serviceAccount` rule's parts: `namespace/name`, the name may be `*`. */
export type ParsedServiceAccountRule =
  | { ok: true; namespace: string; name: string }
  | { ok: false; message: string };

/** Parse `namespace/name` or `namespace/*`. */
export function parseServiceAccountRule(text: string): ParsedServiceAccountRule {
  const parts = text.split("/");
  const [namespace, name] = parts;
  if (parts.length !== 2 || !namespace || !name || namespace === "*") {
    return {
      ok: false,
      message: `expected namespace/name or namespace/* (e.g. payments/billing-client), found ${JSON.stringify(text)}`,
    };
  }
  return { ok: true, namespace, name };
}

/**
 * Compile an allow list once per configuration. Rules are assumed validated (config does it
 * with {@link parseCidr} and {@link parseServiceAccountRule}); an invalid one throws TypeError.
 * An empty list admits no one.
 */
export function compileAllowRules(rules: readonly AllowRule[]): AllowPolicy {
  const addresses = new BlockList();
  let hasCidr = false;
  const users = new Set<string>();
  /** namespace → service-account names, or "*" for the whole namespace. */
  const serviceAccounts = new Map<string, Set<string> | "*">();

  const addServiceAccount = (namespace: string, name: string) => {
    const existing = serviceAccounts.get(namespace);
    if (existing === "*") return;
    if (name === "*") serviceAccounts.set(namespace, "*");
    else if (existing) existing.add(name);
    else serviceAccounts.set(namespace, new Set([name]));
  };

  for (const rule of rules) {
    if ("cidr" in rule) {
      const cidr = parseCidr(rule.cidr);
      if (!cidr.ok) throw new TypeError(`allow cidr: ${cidr.message}`);
      addresses.addSubnet(cidr.address, cidr.prefix, cidr.family);
      hasCidr = true;
    } else if ("user" in rule) {
      users.add(rule.user);
    } else if ("serviceAccount" in rule) {
      const sa = parseServiceAccountRule(rule.serviceAccount);
      if (!sa.ok) throw new TypeError(`allow serviceAccount: ${sa.message}`);
      addServiceAccount(sa.namespace, sa.name);
    } else if ("namespace" in rule) {
      addServiceAccount(rule.namespace, "*");
    } else {
      throw new TypeError(`allow rule without cidr, user, serviceAccount or namespace`);
    }
  }

  return Object.freeze({
    needsCredential: rulesNameCallers(rules),
    allowsAddress(ip: string) {
      if (!hasCidr) return false;
      // Node's BlockList matches ::ffff:a.b.c.d against IPv4 subnets itself (and the reverse);
      // test/callers/allow-rules.test.ts keeps that promise checked.
      const family = ip.includes(":") ? "ipv6" : "ipv4";
      try {
        return addresses.check(ip, family);
      } catch {
        return false; // not an address (a unix socket peer): no cidr rule can match it
      }
    },
    allowsCaller(caller: Caller) {
      if (caller.kind === "user") return users.has(caller.name);
      const names = serviceAccounts.get(caller.namespace);
      return names === "*" || (names?.has(caller.name) ?? false);
    },
    summary: Object.freeze(rules.map(summarizeAllowRule)),
  });
}

/** What to do with a request, and in whose name. */
export type AccessDecision =
  /** `label`: `user:…` / `sa:…` when a valid credential came, else `addr:<peer>`. */
  | { outcome: "allow"; label: string }
  /** 407: the rules name callers and none (or an invalid credential) was presented. */
  | { outcome: "unauthenticated"; reason: string }
  /** 403: who (or where) the caller is is known, and no rule admits it. */
  | { outcome: "forbidden"; reason: string }
  /** 503: a service-account token came, but the cluster's keys to check it could not be loaded. */
  | { outcome: "unavailable"; reason: string }
  /** 503: a password came, but the process's password check queue was full. */
  | { outcome: "busy"; reason: string };

/**
 * Decide one request. `policy` undefined (no `allow`) admits everyone. Otherwise, ORed: a
 * matching `cidr` admits the peer; a valid caller a rule names is admitted; a missing or
 * invalid credential where the rules name callers is 407 (a client may retry with one), a
 * token that could not be checked for want of the cluster's keys 503, a password that could not
 * be checked for want of a free check slot 503; everything else is 403.
 * A credential is never required when the address alone admits.
 */
export function decideAccess(
  policy: AllowPolicy | undefined,
  peerAddress: string,
  authentication: Authentication | undefined,
): AccessDecision {
  const caller = authentication?.ok ? authentication.caller : undefined;
  const label = caller ? callerLabel(caller) : addressLabel(peerAddress);
  if (!policy || policy.allowsAddress(peerAddress)) return { outcome: "allow", label };
  if (caller && policy.allowsCaller(caller)) return { outcome: "allow", label };
  if (policy.needsCredential && !caller) {
    // Neither 407 (the credential may well be good; git would prompt for another) nor 403.
    if (authentication?.ok === false && authentication.reason === "keys_unavailable") {
      return { outcome: "unavailable", reason: authentication.message };
    }
    if (authentication?.ok === false && authentication.reason === "checks_busy") {
      return { outcome: "busy", reason: authentication.message };
    }
    return {
      outcome: "unauthenticated",
      reason:
        authentication && !authentication.ok
          ? authentication.message
          : "this upstream needs Proxy-Authorization (Basic or Bearer)",
    };
  }
  return {
    outcome: "forbidden",
    reason: caller
      ? `${label} is not allowed to use this upstream`
      : `address ${unmapIpv4(peerAddress)} is not allowed to use this upstream`,
  };
}
