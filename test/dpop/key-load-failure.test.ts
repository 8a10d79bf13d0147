/**
 * Issue #24: a `dpop.keyFile` that cannot be used fails the token fetch with BP_ERR_DPOP_KEY
 * (token_unavailable, 503), naming `dpop.keyFile`, before anything is sent to the token
 * endpoint; the source retries with backoff as for any fetch failure, and takes the key once
 * the file is fixed.
 */
import { rm } from "node:fs/promises";
import { afterEach, describe, expect, it } from "vitest";
import type { BearerProxyError } from "../../src/errors.js";
import type { TokenProvider } from "../../src/token/token-provider.js";
import { createTokenSource } from "../../src/token/token-source.js";
import { captureLogs } from "../token/helpers.js";
import { IMMEDIATE_POLICY, specFor, tokenStatuses, useDpopBench } from "./support.js";

const bench = useDpopBench({ keys: true });
let source: TokenProvider | undefined;

afterEach(() => {
  source?.close();
  source = undefined;
});

describe("an unusable dpop.keyFile", () => {
  it("fails the fetch with BP_ERR_DPOP_KEY naming dpop.keyFile, and sends nothing", async () => {
    const keyFile = `${bench.keys.dir}/missing.pem`;
    const logs = captureLogs();
    source = createTokenSource({
      upstream: "api",
      spec: specFor(bench.as, { keyFile }),
      // A long backoff: the waiting request is answered at once instead of waiting for it.
      policy: { ...IMMEDIATE_POLICY, initialBackoffMs: 60_000, maxBackoffMs: 60_000 },
      random: () => 0.99,
      dispatcher: bench.agent,
      logger: logs.logger,
      secretPollIntervalMs: 0,
    });
    const before = tokenStatuses(bench.as).length;
    const error = (await source.getToken().catch((e: unknown) => e)) as BearerProxyError;
    expect(error.publicCode).toBe("token_unavailable");
    expect(error.statusCode).toBe(503);
    expect(error.message).toMatch(
      /cannot sign DPoP proofs: cannot read dpop\.keyFile .*missing\.pem \(ENOENT\)/,
    );
    expect(source.status().lastError).toMatchObject({ code: "token_unavailable" });
    expect(tokenStatuses(bench.as).length).toBe(before);
    expect(logs.records.find((r) => r.msg === "token refresh failed")).toMatchObject({
      code: "BP_ERR_DPOP_KEY",
      err: expect.stringContaining("dpop.keyFile"),
    });
  });

  it("takes the key once the file is fixed", async () => {
    const keyFile = await bench.keys.write("later.pem", "ec-p256");
    await rm(keyFile);
    source = createTokenSource({
      upstream: "api",
      spec: specFor(bench.as, { keyFile }),
      policy: { ...IMMEDIATE_POLICY, initialBackoffMs: 50, maxBackoffMs: 50 },
      dispatcher: bench.agent,
      logger: captureLogs().logger,
      secretPollIntervalMs: 0,
    });
    const pending = source.getToken();
    while (source.status().failureCount === 0) await new Promise((r) => setTimeout(r, 10));
    await bench.keys.write("later.pem", "ec-p256");
    const token = await pending;
    expect(token.tokenType).toBe("DPoP");
    expect(source.status().dpop?.jkt).toBe(token.dpop!.jkt);
  });
});
