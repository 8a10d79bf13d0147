/**
 * Issue #24: when `dpop.keyFile` is rotated the token bound to the old key is useless (its
 * `cnf.jkt` names that key), so the source drops it at once, without waiting for an upstream 401
 * or the min-age guard, and fetches one bound to the new key.
 */
import { rename } from "node:fs/promises";
import { decodeJwt } from "jose";
import { afterEach, describe, expect, it } from "vitest";
import type { AccessToken, TokenProvider } from "../../src/token/token-provider.js";
import { createTokenSource } from "../../src/token/token-source.js";
import { DEFAULT_POLICY } from "../helpers/upstream-config.js";
import { captureLogs } from "../token/helpers.js";
import { specFor, tokenStatuses, useDpopBench } from "./support.js";

const bench = useDpopBench({ keys: true });
let source: TokenProvider | undefined;

afterEach(() => {
  source?.close();
  source = undefined;
});

async function until<T>(probe: () => T | undefined, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("dpop.keyFile rotation", () => {
  it("drops the token bound to the old key and fetches one bound to the new key", async () => {
    const keyFile = await bench.keys.write("dpop.pem", "ec-p256");
    const logs = captureLogs();
    source = createTokenSource({
      upstream: "api",
      spec: specFor(bench.as, { keyFile }),
      // The default policy: a young token is not dropped by invalidate(), but a key change is.
      policy: { ...DEFAULT_POLICY, minRefreshIntervalMs: 0 },
      dispatcher: bench.agent,
      logger: logs.logger,
      secretPollIntervalMs: 0,
    });
    const first = await source.getToken();
    const oldJkt = first.dpop!.jkt;
    expect(decodeJwt(first.value).cnf).toEqual({ jkt: oldJkt });
    const fetchesBefore = tokenStatuses(bench.as).filter((s) => s === 200).length;

    // Written aside and renamed in, as Kubernetes swaps a Secret volume; then the poll's stat().
    await bench.keys.write("next.pem", "rsa-2048");
    await rename(`${bench.keys.dir}/next.pem`, keyFile);
    await first.dpop!.key.check();

    expect(first.dpop!.jkt).not.toBe(oldJkt);
    expect(source.peekToken()).toBeUndefined(); // never sent again with a proof of the new key
    const second: AccessToken = await until(() => {
      const current = source!.peekToken();
      return current && current.value !== first.value ? current : undefined;
    });
    expect(decodeJwt(second.value).cnf).toEqual({ jkt: second.dpop!.jkt });
    expect(second.dpop!.jkt).not.toBe(oldJkt);
    expect(second.dpop!.algorithm).toBe("RS256");
    expect(tokenStatuses(bench.as).filter((s) => s === 200).length).toBe(fetchesBefore + 1);
    expect(source.status().dpop).toEqual({ jkt: second.dpop!.jkt, algorithm: "RS256" });
    expect(logs.records.map((r) => r.msg)).toContain("DPoP key rotation picked up");
  });
});
