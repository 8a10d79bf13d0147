/**
 * The interception CA in a running proxy: loaded (and a first leaf minted) before any port is
 * bound, refused at start when its key became readable by others, and shown on /status (JSON and
 * page) and /metrics by its public facts only: fingerprint, expiry, intercepted upstreams. The
 * CA key and the leaf key appear in no response and no log line.
 */
import { chmodSync, readFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { buildApp } from "../../src/app/build-app.js";
import { loadInterceptCa } from "../../src/config/intercept-ca.js";
import { BearerProxyError } from "../../src/errors.js";
import { createMetrics } from "../../src/observability/metrics.js";
import {
  type AppUnderTest,
  createCapturingLogger,
  loadTestConfig,
  startAppUnderTest,
} from "../helpers/app-under-test.js";
import { type CaFiles, useCaFiles } from "../helpers/intercept-ca-files.js";

const files = useCaFiles();

function document(ca: CaFiles | undefined): Record<string, unknown> {
  const upstream = (name: string, host: string, intercept: boolean) => ({
    name,
    baseUrl: `https://${host}`,
    clientId: "id",
    clientSecret: "s3cret-value-of-the-client",
    match: { hosts: [host] },
    token: { prefetch: false },
    ...(intercept ? { intercept: true } : {}),
  });
  return {
    ...(ca ? { intercept: { caCertFile: ca.caCertFile, caKeyFile: ca.caKeyFile } } : {}),
    upstreams: [
      upstream("sheets", "api.example.test", ca !== undefined),
      upstream("files", "files.example.test:8443", ca !== undefined),
      upstream("plain", "plain.example.test", false),
    ],
  };
}

/** Every line of a PEM body: a leaked chunk of a key is a leaked key. */
const pemLines = (pem: string) =>
  pem.split("\n").filter((line) => line !== "" && !line.startsWith("-----"));

describe("the interception CA in a running proxy", () => {
  let running: AppUnderTest | undefined;
  afterEach(async () => {
    await running?.close();
    running = undefined;
  });

  it("loads at start, mints the first leaf, and shows its public facts on /status and /metrics", async () => {
    const ca = await files.writeCa("ec-p256");
    running = await startAppUnderTest({ config: document(ca), logLevel: "trace" });
    const loaded = await loadInterceptCa(ca);
    expect(running.app.intercept.ca()?.fingerprintSha256).toBe(loaded.fingerprintSha256);
    expect(running.app.intercept.leaves()?.cachedHosts()).toBe(1);

    const json = (await (await fetch(`${running.adminUrl}/status`)).json()) as {
      intercept: { ca: { secondsToExpiry: number } };
    };
    expect(json.intercept).toEqual({
      ca: {
        subject: "CN=test interception CA (ec-p256)",
        fingerprintSha256: loaded.fingerprintSha256,
        notBefore: loaded.notBefore.toISOString(),
        expiresAt: loaded.notAfter.toISOString(),
        secondsToExpiry: expect.any(Number),
        key: "EC P-256",
        certFile: ca.caCertFile,
      },
      upstreams: [
        { name: "sheets", authority: "api.example.test:443" },
        { name: "files", authority: "files.example.test:8443" },
      ],
    });
    expect(json.intercept.ca.secondsToExpiry).toBeGreaterThan(729 * 86_400);

    const page = await (
      await fetch(`${running.adminUrl}/status`, { headers: { accept: "text/html" } })
    ).text();
    expect(page).toContain("<h2>CONNECT interception</h2>");
    expect(page).toContain(loaded.fingerprintSha256);
    expect(page).toContain('sheets <span class="muted">(api.example.test:443)</span>');

    const metrics = await (await fetch(`${running.adminUrl}/metrics`)).text();
    expect(metrics).toContain(
      `bearer_proxy_intercept_ca_expiry_timestamp_seconds ${Math.floor(loaded.notAfter.getTime() / 1000)}`,
    );
    expect(metrics).toContain("# TYPE bearer_proxy_intercept_handshake_failures_total counter");

    const started = running.records.find((r) => String(r.msg).startsWith("CONNECT interception"));
    expect(started?.msg).toContain(`SHA-256 ${loaded.fingerprintSha256}`);
    expect(started?.msg).toContain(
      "sheets (api.example.test:443), files (files.example.test:8443)",
    );

    // Neither key anywhere: responses, page, metrics, logs.
    const leafKey = (await running.app.intercept.leaves()!.leafFor("api.example.test")).keyPem;
    const everything = [JSON.stringify(json), page, metrics, ...running.lines].join("\n");
    expect(everything).toContain(loaded.fingerprintSha256); // the haystack is the real one
    for (const line of [...pemLines(ca.keyPem), ...pemLines(leafKey)]) {
      expect(everything).not.toContain(line);
    }
  });

  it("has no intercept section, and the CA gauge at 0, without intercept", async () => {
    running = await startAppUnderTest({ config: document(undefined) });
    const json: unknown = await (await fetch(`${running.adminUrl}/status`)).json();
    expect(json).not.toHaveProperty("intercept");
    expect(running.app.intercept.ca()).toBeUndefined();
    const metrics = await (await fetch(`${running.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/^bearer_proxy_intercept_ca_expiry_timestamp_seconds 0$/m);
  });

  it("refuses to start, binding nothing, when the CA key became readable by others after validation", async () => {
    const ca = await files.writeCa("ec-p256");
    const loaded = await loadTestConfig({ config: document(ca) });
    chmodSync(ca.caKeyFile, 0o644);
    const captured = createCapturingLogger();
    const app = buildApp(loaded.config, {
      logger: captured.logger,
      metrics: createMetrics({ collectProcessMetrics: false }),
    });
    try {
      const error = await app.listen().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(BearerProxyError);
      expect((error as BearerProxyError).code).toBe("BP_ERR_INTERCEPT_CA");
      expect((error as Error).message).toContain(
        `intercept.caKeyFile: expected a key file only its owner can read, found mode 0644 on ${ca.caKeyFile}`,
      );
      expect(app.proxies.every((p) => !p.server.listening)).toBe(true);
      expect(app.admin.server.listening).toBe(false);
      expect(captured.lines.join("\n")).not.toContain(
        pemLines(readFileSync(ca.caKeyFile, "utf8"))[0],
      );
    } finally {
      await app.close(0).catch(() => {});
      loaded.cleanup();
    }
  });
});
