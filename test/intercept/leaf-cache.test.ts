/**
 * The leaf cache (intercept/leaf-certificates.ts): one leaf per host, shared by concurrent
 * handshakes, replaced after `renewAfterMs` (long before it expires), bounded by `maxHosts`.
 * Both clocks are fake: the cache's monotonic one and the wall clock the validity comes from.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { type InterceptCa, loadInterceptCa } from "../../src/config/intercept-ca.js";
import { createLeafCertificates, LEAF_DEFAULTS } from "../../src/intercept/leaf-certificates.js";
import { useCaFiles } from "../helpers/intercept-ca-files.js";

const HOUR_MS = 3_600_000;
const files = useCaFiles();

function fakeClocks() {
  const clock = { wallMs: Date.UTC(2026, 9, 1, 12), monoMs: 1_000 };
  return {
    clock,
    now: () => clock.wallMs,
    monotonicNow: () => clock.monoMs,
    advance(ms: number) {
      clock.wallMs += ms;
      clock.monoMs += ms;
    },
  };
}

describe("the leaf cache", () => {
  let ca: InterceptCa;
  beforeAll(async () => {
    ca = await loadInterceptCa(await files.writeCa("ec-p256"));
  });

  it("mints a host's leaf once and serves it from the cache, whatever the case of the name", async () => {
    const clocks = fakeClocks();
    const leaves = createLeafCertificates({ ca, ...clocks });
    const first = await leaves.leafFor("api.example.test");
    expect(await leaves.leafFor("API.Example.Test")).toBe(first);
    expect(leaves.mintedCount()).toBe(1);
    expect(leaves.cachedHosts()).toBe(1);
    expect(first.notBefore.getTime()).toBe(clocks.clock.wallMs - HOUR_MS);
    expect(first.notAfter.getTime()).toBe(clocks.clock.wallMs + 24 * HOUR_MS);
  });

  it("shares one mint among concurrent handshakes for one host", async () => {
    const leaves = createLeafCertificates({ ca, ...fakeClocks() });
    const all = await Promise.all(
      Array.from({ length: 20 }, () => leaves.leafFor("a.example.test")),
    );
    expect(new Set(all).size).toBe(1);
    expect(leaves.mintedCount()).toBe(1);
  });

  it("renews a leaf after 12 h, while it still has 12 h left", async () => {
    const clocks = fakeClocks();
    const leaves = createLeafCertificates({ ca, ...clocks });
    const first = await leaves.leafFor("api.example.test");
    clocks.advance(LEAF_DEFAULTS.renewAfterMs - 1);
    expect(await leaves.leafFor("api.example.test")).toBe(first);
    // Still valid for half a day when it is replaced: a client never meets an expired one.
    expect(first.notAfter.getTime() - clocks.clock.wallMs).toBeGreaterThan(12 * HOUR_MS);
    clocks.advance(2);
    const renewed = await leaves.leafFor("api.example.test");
    expect(renewed).not.toBe(first);
    expect(renewed.serialNumber).not.toBe(first.serialNumber);
    // Certificates count whole seconds.
    expect(renewed.notAfter.getTime()).toBe(
      Math.floor((clocks.clock.wallMs + 24 * HOUR_MS) / 1000) * 1000,
    );
    expect(leaves.mintedCount()).toBe(2);
  });

  it("keeps at most maxHosts leaves, dropping the least recently used", async () => {
    const leaves = createLeafCertificates({ ca, ...fakeClocks(), maxHosts: 2 });
    const a = await leaves.leafFor("a.example.test");
    await leaves.leafFor("b.example.test");
    await leaves.leafFor("a.example.test"); // a is now the most recent
    await leaves.leafFor("c.example.test"); // evicts b
    expect(leaves.cachedHosts()).toBe(2);
    expect(await leaves.leafFor("a.example.test")).toBe(a);
    expect(leaves.mintedCount()).toBe(3);
    await leaves.leafFor("b.example.test");
    expect(leaves.mintedCount()).toBe(4);
  });

  it("reuses one leaf key for every host (one per factory, made on the first leaf)", async () => {
    const leaves = createLeafCertificates({ ca, ...fakeClocks() });
    const [a, b] = await Promise.all([
      leaves.leafFor("a.example.test"),
      leaves.leafFor("b.example.test"),
    ]);
    expect(a.keyPem).toBe(b.keyPem);
    const other = await createLeafCertificates({ ca, ...fakeClocks() }).leafFor("a.example.test");
    expect(other.keyPem).not.toBe(a.keyPem);
  });
});
