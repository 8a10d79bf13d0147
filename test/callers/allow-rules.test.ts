import { describe, expect, it } from "vitest";
import { parseCidr } from "../../src/base/cidr.js";
import { addressLabel } from "../../src/base/peer-address.js";
import {
  compileAllowRules,
  decideAccess,
  parseServiceAccountRule,
} from "../../src/callers/allow.js";
import { type Authentication, callerLabel } from "../../src/callers/caller-types.js";

const sa = (namespace: string, name: string) =>
  ({ kind: "serviceAccount", namespace, name }) as const;
const user = (name: string) => ({ kind: "user", name }) as const;
const ok = (caller: ReturnType<typeof sa> | ReturnType<typeof user>): Authentication => ({
  ok: true,
  caller,
  expiresAtMs: Number.MAX_SAFE_INTEGER,
});

describe("parseCidr", () => {
  it.each([
    ["10.12.0.0/16", { family: "ipv4", address: "10.12.0.0", prefix: 16 }],
    ["10.1.2.3", { family: "ipv4", prefix: 32 }],
    ["0.0.0.0/0", { family: "ipv4", prefix: 0 }],
    ["fd00::/8", { family: "ipv6", address: "fd00::", prefix: 8 }],
    ["2001:db8::1", { family: "ipv6", prefix: 128 }],
    ["::ffff:10.0.0.0/104", { family: "ipv6", prefix: 104 }],
  ])("%s parses", (text, expected) => {
    expect(parseCidr(text)).toMatchObject({ ok: true, ...expected });
  });

  it.each([
    "10.12.0.0/33",
    "fd00::/129",
    "10.12.0.0/-1",
    "10.12.0.0/",
    "10.12.0/16",
    "10.12.0.0/16/1",
    "example.com/24",
    "fe80::1%eth0/64",
    "",
  ])("%j is refused with a message", (text) => {
    const parsed = parseCidr(text);
    expect(parsed.ok).toBe(false);
    expect((parsed as { message: string }).message).toMatch(/^expected /);
  });
});

describe("allow rules", () => {
  const policy = compileAllowRules([
    { cidr: "10.12.0.0/16" },
    { cidr: "fd00:12::/32" },
    { user: "reporting-cron" },
    { serviceAccount: "payments/billing-client" },
    { serviceAccount: "ops/*" },
    { namespace: "audit" },
  ]);

  it("summarises the rules", () => {
    expect(policy.summary).toEqual([
      "cidr 10.12.0.0/16",
      "cidr fd00:12::/32",
      "user reporting-cron",
      "sa payments/billing-client",
      "sa ops/*",
      "sa audit/*",
    ]);
    expect(policy.needsCredential).toBe(true);
    expect(compileAllowRules([{ cidr: "10.0.0.0/8" }]).needsCredential).toBe(false);
  });

  it("matches IPv4, IPv6 and IPv4-mapped IPv6 peers", () => {
    expect(policy.allowsAddress("10.12.255.1")).toBe(true);
    expect(policy.allowsAddress("10.13.0.1")).toBe(false);
    expect(policy.allowsAddress("::ffff:10.12.3.4")).toBe(true);
    expect(policy.allowsAddress("::FFFF:10.13.3.4")).toBe(false);
    expect(policy.allowsAddress("fd00:12:abcd::7")).toBe(true);
    expect(policy.allowsAddress("fd00:13::7")).toBe(false);
    expect(policy.allowsAddress("")).toBe(false);
    expect(compileAllowRules([{ user: "x" }]).allowsAddress("10.12.0.1")).toBe(false);
  });

  it("matches users, service accounts and namespaces (namespace = ns/*)", () => {
    expect(policy.allowsCaller(user("reporting-cron"))).toBe(true);
    expect(policy.allowsCaller(user("billing-client"))).toBe(false);
    expect(policy.allowsCaller(sa("payments", "billing-client"))).toBe(true);
    expect(policy.allowsCaller(sa("payments", "other"))).toBe(false);
    expect(policy.allowsCaller(sa("ops", "anything"))).toBe(true);
    expect(policy.allowsCaller(sa("audit", "reader"))).toBe(true);
    expect(policy.allowsCaller(sa("kube-system", "billing-client"))).toBe(false);
    // A user named like a service account is still a user.
    expect(policy.allowsCaller(user("payments/billing-client"))).toBe(false);
  });

  it("a namespace wildcard and a named account in one namespace combine", () => {
    const p = compileAllowRules([
      { serviceAccount: "ns/a" },
      { namespace: "ns" },
      { serviceAccount: "ns/b" },
    ]);
    expect(p.allowsCaller(sa("ns", "z"))).toBe(true);
  });

  it("invalid rules throw (config validates first)", () => {
    expect(() => compileAllowRules([{ cidr: "10.0.0.0/40" }])).toThrow(TypeError);
    expect(() => compileAllowRules([{ serviceAccount: "payments" }])).toThrow(TypeError);
    expect(parseServiceAccountRule("*/x")).toMatchObject({ ok: false });
    expect(parseServiceAccountRule("a/b/c")).toMatchObject({ ok: false });
    expect(parseServiceAccountRule("payments/*")).toEqual({
      ok: true,
      namespace: "payments",
      name: "*",
    });
  });
});

describe("decideAccess", () => {
  const mixed = compileAllowRules([
    { cidr: "10.12.0.0/16" },
    { user: "reporting-cron" },
    { namespace: "payments" },
  ]);
  const cidrOnly = compileAllowRules([{ cidr: "10.12.0.0/16" }]);
  const invalid: Authentication = {
    ok: false,
    reason: "bad_password",
    message: "the user name or password is wrong",
  };

  it("labels", () => {
    expect(callerLabel(user("alice"))).toBe("user:alice");
    expect(callerLabel(sa("payments", "billing-client"))).toBe("sa:payments/billing-client");
    expect(addressLabel("::ffff:10.1.2.3")).toBe("addr:10.1.2.3");
    expect(addressLabel("fd00::1")).toBe("addr:fd00::1");
  });

  it("no allow list admits everyone", () => {
    expect(decideAccess(undefined, "192.0.2.1", undefined)).toEqual({
      outcome: "allow",
      label: "addr:192.0.2.1",
    });
  });

  it("a matching cidr admits without a credential, labelled by the caller when one is valid", () => {
    expect(decideAccess(mixed, "::ffff:10.12.0.9", undefined)).toEqual({
      outcome: "allow",
      label: "addr:10.12.0.9",
    });
    expect(decideAccess(mixed, "10.12.0.9", invalid)).toEqual({
      outcome: "allow",
      label: "addr:10.12.0.9",
    });
    expect(decideAccess(cidrOnly, "10.12.0.9", ok(user("someone")))).toEqual({
      outcome: "allow",
      label: "user:someone",
    });
  });

  it("a valid caller a rule names is admitted from anywhere", () => {
    expect(decideAccess(mixed, "192.0.2.1", ok(user("reporting-cron")))).toEqual({
      outcome: "allow",
      label: "user:reporting-cron",
    });
    expect(decideAccess(mixed, "2001:db8::1", ok(sa("payments", "x")))).toEqual({
      outcome: "allow",
      label: "sa:payments/x",
    });
  });

  it("no or an invalid credential where rules name callers is 407", () => {
    expect(decideAccess(mixed, "192.0.2.1", undefined)).toEqual({
      outcome: "unauthenticated",
      reason: "this upstream needs Proxy-Authorization (Basic or Bearer)",
    });
    expect(decideAccess(mixed, "192.0.2.1", invalid)).toEqual({
      outcome: "unauthenticated",
      reason: "the user name or password is wrong",
    });
  });

  it("a token unchecked for want of the cluster's keys is 503 where rules name callers; a cidr still admits", () => {
    const unchecked: Authentication = {
      ok: false,
      reason: "keys_unavailable",
      message: "the cluster's service-account signing keys could not be loaded",
    };
    expect(decideAccess(mixed, "192.0.2.1", unchecked)).toEqual({
      outcome: "unavailable",
      reason: "the cluster's service-account signing keys could not be loaded",
    });
    expect(decideAccess(mixed, "10.12.0.9", unchecked)).toEqual({
      outcome: "allow",
      label: "addr:10.12.0.9",
    });
  });

  it("a valid caller no rule names, or an address with cidr-only rules, is 403", () => {
    expect(decideAccess(mixed, "192.0.2.1", ok(sa("kube-system", "x")))).toEqual({
      outcome: "forbidden",
      reason: "sa:kube-system/x is not allowed to use this upstream",
    });
    expect(decideAccess(cidrOnly, "::ffff:192.0.2.1", undefined)).toEqual({
      outcome: "forbidden",
      reason: "address 192.0.2.1 is not allowed to use this upstream",
    });
    expect(decideAccess(cidrOnly, "192.0.2.1", invalid)).toMatchObject({ outcome: "forbidden" });
  });
});
