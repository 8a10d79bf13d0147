/**
 * Issue 32: a token's lifetime counts from when its request was sent, not from when the fetch
 * began. Reading the secret files comes first, and on a loaded machine it took 60–500 ms
 * (test/hardening/long-run-short.test.ts saw 503s at the end of a token's life for it): counted
 * in, the token was dropped that much before its margin.
 */
import { describe, expect, it } from "vitest";
import type { CredentialReader } from "../../src/token/secret-reader.js";
import { FakeClock } from "../helpers/fake-clock.js";
import { makeSource } from "./fake-endpoint.js";

const READ_MS = 400;

/** Secret files that take READ_MS of (fake) time to read. */
function slowReader(clock: FakeClock): CredentialReader {
  return {
    read: () =>
      new Promise((resolve) =>
        clock.setTimeout(
          () => resolve({ clientId: "id", clientSecret: "secret", version: "v1" }),
          READ_MS,
        ),
      ),
    check: async () => {},
    onChange: () => () => {},
    watchesFiles: true,
    close: () => {},
  };
}

describe("token lifetime", () => {
  it("counts from the request, after the secret files were read", async () => {
    const clock = new FakeClock();
    // The refresh comes at the margin (90%), so the first token is still the one served.
    const { source, endpoint } = makeSource({
      clock,
      credentialReader: slowReader(clock),
      policy: { refreshWindow: [0.9, 0.9] },
    });
    endpoint.latencyMs = 100;
    endpoint.answer = () => endpoint.token(10);
    source.start();
    await clock.advance(READ_MS + 100);
    expect(endpoint.calls[0]?.atMs).toBe(READ_MS);
    const token = source.peekToken();
    // Sent at 400 ms: expires at 10.4 s, usable until 9.4 s (10% margin).
    expect(token?.expiresAtMs).toBe(READ_MS + 10_000);
    await clock.advance(9_350 - clock.now());
    expect(source.peekToken()?.value).toBe(token?.value);
    source.close();
  });

  it("still never from after the request: a slow answer does not stretch it", async () => {
    const clock = new FakeClock();
    const { source, endpoint } = makeSource({ clock, credentialReader: slowReader(clock) });
    endpoint.latencyMs = 2_000;
    endpoint.answer = () => endpoint.token(10);
    source.start();
    await clock.advance(READ_MS + 2_000);
    expect(source.peekToken()?.expiresAtMs).toBe(READ_MS + 10_000);
    source.close();
  });
});
