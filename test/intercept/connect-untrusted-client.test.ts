/**
 * Issue 34: a client that does not trust the interception CA fails its handshake inside the
 * tunnel. The proxy logs one warn line naming the host and the CA the client must trust, counts
 * it in `bearer_proxy_intercept_handshake_failures_total{upstream,reason}`, and goes on serving
 * the next client. curl (OpenSSL) refuses with an unknown_ca alert; a Node client hangs up
 * without one — both are reported at once, not when a timeout finally ends the connection.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadInterceptCa } from "../../src/config/intercept-ca.js";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, logsMatching, startAppUnderTest } from "../helpers/app-under-test.js";
import { accessLines } from "../helpers/callers-fixture.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { type CaFiles, useCaFiles } from "../helpers/intercept-ca-files.js";
import { createTestPki } from "../helpers/tls.js";
import { waitFor } from "../helpers/wait.js";
import { metricsText, metricValue } from "../pacing/support/gateway.js";
import {
  hasTool,
  interceptBlock,
  interceptedUpstream,
  runTool,
  sendConnect,
  toolEnv,
} from "./support/connect-client.js";

const HAS_CURL = await hasTool("curl");
const FAILURES = "bearer_proxy_intercept_handshake_failures_total";

const files = useCaFiles("bp-connect-untrusted-");
let ca: CaFiles;
let fingerprint: string;
let emulator: Emulator;
let gateway: AppUnderTest;
let home: string;
let authority: string;

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "bp-connect-untrusted-home-"));
  const pki = await createTestPki();
  ca = await files.writeCa("ec-p256");
  fingerprint = (await loadInterceptCa(ca)).fingerprintSha256;
  emulator = await startTlsEmulator(pki, { host: "localhost" });
  authority = new URL(emulator.url).host;
  gateway = await startAppUnderTest({
    caPem: pki.caPem,
    config: {
      // Far beyond the waits below: a failure must be reported when it happens, not when a
      // timeout ends the connection.
      limits: { headersTimeout: "60s", keepAliveTimeout: "60s" },
      intercept: interceptBlock(ca),
      upstreams: [interceptedUpstream("api", emulator.url)],
    },
  });
}, 30_000);
afterAll(async () => {
  await gateway?.close();
  await emulator?.close();
  if (home) rmSync(home, { recursive: true, force: true });
});

const failures = async (reason: string) =>
  metricValue(await metricsText(gateway.adminUrl), FAILURES, { upstream: "api", reason });

const refusalLines = () =>
  logsMatching(gateway.records, /TLS handshake|certificate for|connection for/);

describe("a client that does not trust the interception CA", () => {
  it.skipIf(!HAS_CURL)(
    "curl without the CA: its handshake fails, one warn line names the host and the CA, counted untrusted_ca; the next client is served",
    async () => {
      const before = refusalLines().length;
      const url = `${emulator.url}/echo/untrusted`;
      const env = toolEnv(home, { https_proxy: gateway.url });
      const refused = await runTool("curl", ["-sS", url], env);
      expect(refused.code).toBe(60); // peer certificate cannot be authenticated with known CAs
      await waitFor(async () => (await failures("untrusted_ca")) === 1, "the failure counted");
      const lines = refusalLines().slice(before);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({
        level: "warn",
        upstream: "api",
        host: "localhost",
        reason: "untrusted_ca",
      });
      expect(lines[0]!.msg).toBe(
        `client refused the certificate for localhost: it must trust the interception CA "CN=test interception CA (ec-p256)" (SHA-256 ${fingerprint}), which \`bearer-proxy intercept-ca\` prints (a client that pins localhost's own certificate cannot be intercepted)`,
      );
      // Nothing reached the upstream, and no access line was written for the refused tunnel.
      expect(accessLines(gateway.records).some((l) => l.path === "/echo/untrusted")).toBe(false);

      const trusted = await runTool("curl", ["-sS", "--cacert", ca.caCertFile, url], env);
      expect(trusted.code).toBe(0);
      expect(JSON.parse(trusted.stdout)).toMatchObject({ url: "/echo/untrusted" });
    },
  );

  it("a Node client without the CA hangs up without an alert: reported at once as closed", async () => {
    const before = refusalLines().length;
    const startMs = performance.now();
    const answer = await sendConnect(gateway.url, authority);
    const { connect } = await import("node:tls");
    const refusal = await new Promise<NodeJS.ErrnoException>((resolve) => {
      const tls = connect({ socket: answer.socket, servername: "localhost" });
      tls.on("error", resolve);
    });
    expect(refusal.code).toBe("SELF_SIGNED_CERT_IN_CHAIN");
    await waitFor(() => refusalLines().length > before, "the refusal's log line", 10_000);
    // Reported when the client hung up, not when headersTimeout (60 s) would have ended it.
    expect(performance.now() - startMs).toBeLessThan(10_000);
    const lines = refusalLines().slice(before);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: "warn",
      upstream: "api",
      host: "localhost",
      reason: "closed",
    });
    expect(lines[0]!.msg).toContain(
      `client closed the connection for localhost during the TLS handshake`,
    );
    expect(lines[0]!.msg).toContain(`SHA-256 ${fingerprint}`);
    expect(await failures("closed")).toBe(1);
    const open = await new Promise<number>((resolve, reject) =>
      gateway.app.proxies[0]!.server.getConnections((err, count) =>
        err ? reject(err) : resolve(count),
      ),
    );
    expect(open).toBe(0);
  });
});
