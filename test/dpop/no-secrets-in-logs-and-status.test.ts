/**
 * Issue #24: the DPoP key shows up in logs, the token status and /status only as its public
 * facts (algorithm, kind, file path, RFC 7638 thumbprint); never a private key, a proof or a
 * token, through a fetch with the AS's nonce retry and a key rotation. /status shows
 * `dpop: { jkt, algorithm }` per upstream with dpop, and why an ephemeral key's tokens are not
 * shared through Redis.
 */
import { rename } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { buildUpstreamDetail, type UpstreamSnapshot } from "../../src/admin/status-report.js";
import { createMetrics } from "../../src/observability/metrics.js";
import type { AccessToken } from "../../src/token/token-provider.js";
import { createTokenSource } from "../../src/token/token-source.js";
import { makeUpstreamConfig } from "../helpers/upstream-config.js";
import { captureLogs } from "../token/helpers.js";
import { IMMEDIATE_POLICY, PROOF_PREFIX, privateKeyForms, useDpopBench } from "./support.js";

const bench = useDpopBench({ keys: true });
const metrics = createMetrics({ collectProcessMetrics: false });

function upstreamWith(dpop: { keyFile?: string; algorithm?: "ES256" | "EdDSA" }) {
  return makeUpstreamConfig("api", {
    baseUrl: "https://api.example.test",
    tokenUrl: bench.as.tokenUrl,
    allowInsecureHttp: true,
    clientId: bench.as.clientId,
    clientSecret: bench.as.clientSecret,
    scope: bench.as.scope,
    dpop,
  });
}

async function report(snapshot: UpstreamSnapshot, sharedCacheState?: string) {
  return buildUpstreamDetail(
    { nowWallMs: Date.now(), nowMs: performance.now(), metrics, sharedCacheState },
    snapshot,
  );
}

describe("DPoP in logs and status", () => {
  it("shows the key's thumbprint and algorithm, never the key, a proof or a token", async () => {
    const keyFile = await bench.keys.write("status.pem", "ec-p256");
    const forms = await privateKeyForms(keyFile);
    const config = upstreamWith({ keyFile });
    const logs = captureLogs();
    const source = createTokenSource({
      upstream: "api",
      spec: config.token,
      policy: IMMEDIATE_POLICY,
      dispatcher: bench.agent,
      logger: logs.logger,
      secretPollIntervalMs: 0,
    });
    const mode = { mode: "prefetch", decidedBy: "eagerLimit" } as const;
    try {
      // Before the first fetch the key is not loaded: no thumbprint yet.
      expect((await report({ config, status: source.status(), mode })).dpop).toEqual({
        jkt: null,
        algorithm: null,
      });

      const tokens: AccessToken[] = [await source.getToken()];
      const first = tokens[0]!;
      await bench.keys.write("next.pem", "ed25519");
      forms.push(...(await privateKeyForms(`${bench.keys.dir}/next.pem`)));
      await rename(`${bench.keys.dir}/next.pem`, keyFile);
      await first.dpop!.key.check();
      tokens.push(await source.getToken());
      const jkt = first.dpop!.jkt;

      const detail = await report({ config, status: source.status(), mode });
      expect(detail.dpop).toEqual({ jkt, algorithm: "EdDSA" });
      expect(detail.token.state).toBe("valid");

      const texts = {
        logs: logs.text(),
        status: JSON.stringify(source.status()),
        report: JSON.stringify(detail),
      };
      expect(texts.logs).toContain(jkt); // the key loaded, and its rotation, are logged
      for (const [where, text] of Object.entries(texts)) {
        for (const form of forms) expect(text, where).not.toContain(form);
        expect(text, where).not.toContain(PROOF_PREFIX);
        for (const token of tokens) expect(text, where).not.toContain(token.value);
        expect(text, where).not.toContain(bench.as.clientSecret);
      }
    } finally {
      source.close();
    }
  });

  it("says on /status why an ephemeral key's tokens are not shared", async () => {
    const config = upstreamWith({ algorithm: "EdDSA" });
    const source = createTokenSource({
      upstream: "api",
      spec: config.token,
      policy: IMMEDIATE_POLICY,
      dispatcher: bench.agent,
      logger: captureLogs().logger,
    });
    const status = source.status();
    source.close();
    const mode = { mode: "lazy", decidedBy: "eagerLimit" } as const;
    const shared = await report({ config, status, mode }, "up");
    expect(shared.tokenNotShared).toMatch(/ephemeral DPoP key are not shared through Redis/);
    expect(shared.dpop).toEqual({ jkt: null, algorithm: "EdDSA" });
    const keyFile = await bench.keys.write("shared.pem", "ec-p256");
    const withFile = await report({ config: upstreamWith({ keyFile }), status, mode }, "up");
    expect(withFile).not.toHaveProperty("tokenNotShared");
    // No dpop setting, no dpop field.
    const plain = makeUpstreamConfig("plain");
    expect(await report({ config: plain, status, mode })).not.toHaveProperty("dpop");
  });
});
