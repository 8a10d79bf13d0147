/**
 * Issue 34: what a CONNECT that is not terminated gets. An authority no `intercept: true`
 * upstream names — another host, another port of an intercepted host, the same server by
 * another name, a plain upstream's own host — is refused 403 `host_not_allowed` before anything
 * is dialled (the upstream sees no connection); a target that is not `host:port` gets 400; and
 * without `intercept` configured every CONNECT keeps its 405. Each refusal carries the error
 * contract, closes the connection, is logged (`via: connect`) and counted.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import { accessLines } from "../helpers/callers-fixture.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { type FakeUpstream, startFakeUpstream } from "../helpers/fake-upstreams.js";
import { useCaFiles } from "../helpers/intercept-ca-files.js";
import { rawRequest } from "../helpers/raw-http.js";
import { createTestPki, type TestPki } from "../helpers/tls.js";
import { sleep, waitFor } from "../helpers/wait.js";
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

const files = useCaFiles("bp-connect-refusals-");
let pki: TestPki;
let emulator: Emulator;
/** A plain (not intercepted) upstream that counts every connection it is offered. */
let plain: FakeUpstream;

beforeAll(async () => {
  pki = await createTestPki();
  emulator = await startTlsEmulator(pki, { host: "localhost" });
  plain = await startFakeUpstream({ cert: pki.good });
}, 30_000);
afterAll(async () => {
  await plain?.close();
  await emulator?.close();
});

const port = (url: string) => Number(new URL(url).port);

describe("with intercept configured", () => {
  let gateway: AppUnderTest;
  beforeAll(async () => {
    const ca = await files.writeCa("ec-p256");
    gateway = await startAppUnderTest({
      caPem: pki.caPem,
      config: {
        intercept: interceptBlock(ca),
        upstreams: [
          interceptedUpstream("api", emulator.url),
          {
            name: "plain",
            baseUrl: `https://localhost:${plain.port}`,
            tokenUrl: `${emulator.url}/iam/v1/oauth2/token`,
            clientId: "demo-client",
            clientSecret: "demo-secret",
            match: { hosts: ["plain.internal"] },
          },
        ],
      },
    });
  }, 30_000);
  afterAll(async () => {
    await gateway?.close();
  });

  it("refuses an authority no intercepted upstream names: 403 host_not_allowed, nothing dialled", async () => {
    const intercepted = new URL(emulator.url).host;
    const targets = [
      `localhost:${plain.port}`, // a plain upstream's host: routed for http://, never tunnelled
      `127.0.0.1:${port(emulator.url)}`, // the intercepted server under another name
      "localhost:443", // the intercepted host on another port
      "example.com:443",
    ];
    for (const target of targets) {
      const answer = await sendConnect(gateway.url, target);
      expect(answer.status, target).toBe(403);
      expect(answer.head.split("\r\n")[0]).toBe(
        "HTTP/1.1 403 Forbidden - bearer-proxy tunnels only the hosts it intercepts",
      );
      const response = answer.response!;
      expect(response.headers.get("bearer-proxy-error")).toEqual(["host_not_allowed"]);
      expect(response.headers.get("connection")).toEqual(["close"]);
      const body = JSON.parse(response.body) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("host_not_allowed");
      expect(body.error.message).toContain(`CONNECT to ${target.toLowerCase()} is not intercepted`);
      expect(body.error.message).toContain(`(${intercepted})`);
      expect(answer.socket.destroyed || answer.socket.readableEnded).toBe(true);
    }
    // A dial would have happened by now; none did.
    await sleep(200);
    expect(plain.connections()).toBe(0);
    const lines = accessLines(gateway.records).filter((l) => l.errorCode === "host_not_allowed");
    expect(lines.map((l) => l.path)).toEqual(targets);
    expect(lines[0]).toMatchObject({
      method: "CONNECT",
      status: 403,
      upstream: "none",
      via: "connect",
    });
    const metrics = await metricsText(gateway.adminUrl);
    expect(metricValue(metrics, "bearer_proxy_errors_total", { code: "host_not_allowed" })).toBe(4);
  });

  it.skipIf(!HAS_CURL)(
    "curl through https_proxy to a non-listed host fails on the 403",
    async () => {
      const got = await runTool(
        "curl",
        ["-sS", `https://localhost:${plain.port}/echo`],
        toolEnv("/", { https_proxy: gateway.url }),
      );
      expect(got.code).toBe(56);
      expect(got.stderr).toContain("CONNECT tunnel failed, response 403");
      expect(plain.connections()).toBe(0);
    },
  );

  it("answers 400 to a CONNECT whose target is not host:port", async () => {
    const proxyPort = port(gateway.url);
    for (const target of [
      "localhost",
      "/echo",
      `https://localhost:${port(emulator.url)}/`,
      "localhost:0",
      "localhost:65536",
      `user@localhost:${port(emulator.url)}`,
      `localhost:${port(emulator.url)}/x`,
    ]) {
      const exchange = await rawRequest(proxyPort, `CONNECT ${target} HTTP/1.1\r\nHost: x\r\n\r\n`);
      expect(exchange.responses[0]?.status, `${target}: ${exchange.text}`).toBe(400);
      expect(exchange.closed, target).toBe(true);
      expect(exchange.responses[0]!.headers.get("bearer-proxy-error")).toEqual(["bad_request"]);
    }
    await waitFor(
      () => accessLines(gateway.records).filter((l) => l.errorCode === "bad_request").length >= 1,
      "the 400s' access lines",
    );
    expect(plain.connections()).toBe(0);
  });
});

describe("without intercept configured", () => {
  let gateway: AppUnderTest;
  beforeAll(async () => {
    gateway = await startAppUnderTest({
      caPem: pki.caPem,
      config: {
        upstreams: [
          {
            name: "api",
            baseUrl: emulator.url,
            clientId: "demo-client",
            clientSecret: "demo-secret",
          },
        ],
      },
    });
  }, 30_000);
  afterAll(async () => {
    await gateway?.close();
  });

  it("answers every CONNECT 405, the configured upstream's authority included", async () => {
    for (const target of [new URL(emulator.url).host, "example.com:443"]) {
      const answer = await sendConnect(gateway.url, target);
      expect(answer.status).toBe(405);
      expect(answer.head.split("\r\n")[0]).toBe(
        "HTTP/1.1 405 CONNECT refused - use http:// URLs, bearer-proxy forwards them over HTTPS",
      );
      expect(answer.response!.headers.get("allow")).toEqual([
        "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS",
      ]);
    }
  });
});
