import { describe, expect, it, vi } from "vitest";

// Counts the digests made: a repeated header on a connection must not be hashed again (issue 33).
const digests = vi.hoisted(() => ({ count: 0 }));
vi.mock("../../src/callers/credential-key.js", async (importOriginal) => {
  const original = await importOriginal<typeof import("../../src/callers/credential-key.js")>();
  return {
    credentialKey: (header: string) => {
      digests.count++;
      return original.credentialKey(header);
    },
  };
});

const { createConnectionProofs } = await import("../../src/callers/connection-proofs.js");
const { credentialKey } = await import("../../src/callers/credential-key.js");

const TOKEN = `Bearer ${"eyJhbGciOiJFUzI1NiJ9.".padEnd(1024, "x")}.sig`;

describe("connection proofs: the credential key of a connection's header", () => {
  it("hashes a header once per connection while the connection repeats it", () => {
    const proofs = createConnectionProofs();
    const connection = {};
    const expected = credentialKey(TOKEN);
    digests.count = 0;
    expect(proofs.keyOf(connection, TOKEN)).toBe(expected);
    expect(proofs.keyOf(connection, TOKEN)).toBe(expected);
    expect(proofs.keyOf(connection, `${TOKEN}`)).toBe(expected);
    expect(digests.count).toBe(1);
  });

  it("gives a header differing in one byte its own key, and each connection its own digest", () => {
    const proofs = createConnectionProofs();
    const first = {};
    const other = `${TOKEN.slice(0, -1)}h`;
    const firstKey = proofs.keyOf(first, TOKEN);
    expect(proofs.keyOf(first, other)).toBe(credentialKey(other));
    expect(proofs.keyOf(first, other)).not.toBe(firstKey);
    // Back to the first value: its digest again (only the last value is remembered).
    expect(proofs.keyOf(first, TOKEN)).toBe(firstKey);
    digests.count = 0;
    expect(proofs.keyOf({}, TOKEN)).toBe(firstKey);
    expect(digests.count).toBe(1);
  });

  it("keeps proofs per connection by key, as before", () => {
    let nowMs = 100;
    const proofs = createConnectionProofs({ now: () => nowMs });
    const connection = {};
    const key = proofs.keyOf(connection, TOKEN);
    expect(proofs.provedBefore(connection, key, 200)).toBe(false);
    proofs.remember(connection, key);
    nowMs = 300;
    proofs.remember(connection, key); // the first proof's time is kept
    expect(proofs.provedBefore(connection, key, 200)).toBe(true);
    expect(proofs.provedBefore({}, key, 200)).toBe(false);
  });
});
