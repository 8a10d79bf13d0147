import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import { request } from "undici";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { EchoResponse } from "../../src/emulator/index.js";
import { useEmulator } from "../helpers/emulator.js";
import { type FakeUpstream, startFakeUpstream } from "../helpers/fake-upstreams.js";
import { createTestPki } from "../helpers/tls.js";
import { requestLogs, startTestProxy, type TestProxy } from "./harness.js";
import { createStubTokens, type StubTokens } from "./stub-tokens.js";

const sha256 = (data: Buffer) => createHash("sha256").update(data).digest("hex");

/** An upstream 401 on a replayable request: one new token, one replay (issue 4). */
describe("401 replay against the emulator with real token sources", () => {
  const emulator = useEmulator();
  let proxy: TestProxy;

  beforeAll(async () => {
    proxy = await startTestProxy({
      caPem: emulator().caPem,
      tokens: "real",
      config: {
        upstreams: [
          {
            name: "api",
            baseUrl: emulator().url,
            replayBodyLimit: "64KiB",
            token: { minAgeBeforeInvalidate: "0ms", minRefreshInterval: "0ms" },
          },
        ],
      },
    });
    // Warm up: the first token.
    const warm = await request(`${proxy.url}/echo/warm`);
    await warm.body.text();
  });
  afterAll(() => proxy.close());

  it("GET after the token was revoked: exactly one token request and one replay, client sees 200", async () => {
    emulator().revokeAllTokens();
    emulator().resetStats();
    const response = await request(`${proxy.url}/echo/after-revoke`);
    expect(response.statusCode).toBe(200);
    expect(((await response.body.json()) as EchoResponse).url).toBe("/echo/after-revoke");
    const stats = emulator().stats();
    expect(stats.tokenRequests.total).toBe(1);
    expect(stats.apiRequests).toBe(2);
    expect(stats.unauthorized).toBe(1);
    expect(requestLogs(proxy).at(-1)).toMatchObject({ replayed: true, status: 200 });
  });

  it("a buffered POST body is replayed byte for byte", async () => {
    emulator().revokeAllTokens();
    emulator().resetStats();
    const body = Buffer.alloc(60 * 1024, 7);
    const response = await request(`${proxy.url}/echo/post`, { method: "POST", body });
    const echo = (await response.body.json()) as EchoResponse;
    expect(response.statusCode).toBe(200);
    expect(echo.bodyLength).toBe(body.length);
    expect(echo.bodySha256).toBe(sha256(body));
    expect(emulator().stats().tokenRequests.total).toBe(1);
    expect(emulator().stats().apiRequests).toBe(2);
  });

  it("50 concurrent requests after a revoke: still exactly one token request", async () => {
    emulator().revokeAllTokens();
    emulator().resetStats();
    const statuses = await Promise.all(
      Array.from({ length: 50 }, async (_, i) => {
        const response = await request(`${proxy.url}/echo/c${i}`);
        await response.body.text();
        return response.statusCode;
      }),
    );
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect(emulator().stats().tokenRequests.total).toBe(1);
  });

  it("a body over replayBodyLimit is not replayable: the upstream's 401 is passed through unchanged", async () => {
    emulator().revokeAllTokens();
    emulator().resetStats();
    const response = await request(`${proxy.url}/echo/big`, {
      method: "POST",
      body: Buffer.alloc(100 * 1024, 1),
    });
    expect(response.statusCode).toBe(401);
    expect(response.headers["www-authenticate"]).toBe('Bearer error="invalid_token"');
    expect(response.headers["bearer-proxy-error"]).toBeUndefined();
    expect(((await response.body.json()) as { error: string }).error).toBe("invalid_token");
    expect(emulator().stats().apiRequests).toBe(1);
  });

  it("a chunked body is not replayable either", async () => {
    emulator().revokeAllTokens();
    emulator().resetStats();
    const response = await request(`${proxy.url}/echo/chunked`, {
      method: "POST",
      body: Readable.from([Buffer.from("abc"), Buffer.from("def")]),
    });
    expect(response.statusCode).toBe(401);
    await response.body.text();
    expect(emulator().stats().apiRequests).toBe(1);
  });
});

describe("401 replay limits", () => {
  let upstream: FakeUpstream;
  let proxy: TestProxy;
  let tokens: StubTokens;
  let accepted: (authorization: string | undefined) => boolean;

  beforeEach(async () => {
    const pki = await createTestPki();
    upstream = await startFakeUpstream({ cert: pki.good, authorize: (a) => accepted(a) });
    tokens = createStubTokens();
    proxy = await startTestProxy({
      caPem: pki.caPem,
      tokens: { u: tokens },
      config: { upstreams: [{ name: "u", baseUrl: upstream.origin }] },
    });
  });
  afterEach(async () => {
    await proxy.close();
    await upstream.close();
  });

  it("a replay that is 401 again is passed through: two upstream requests, never a third", async () => {
    accepted = () => false;
    const response = await request(`${proxy.url}/echo/x`);
    expect(response.statusCode).toBe(401);
    expect(await response.body.json()).toEqual({ error: "invalid_token" });
    expect(
      upstream.requests.map((r) => r.headers.find(([n]) => n === "authorization")?.[1]),
    ).toEqual(["Bearer stub-token-1", "Bearer stub-token-2"]);
    expect(tokens.fetches).toBe(2);
    expect(tokens.invalidations).toBe(1);
  });

  it("a token too young to drop: no replay, the 401 passes", async () => {
    accepted = () => false;
    tokens.refuseInvalidate = true;
    const response = await request(`${proxy.url}/echo/x`);
    expect(response.statusCode).toBe(401);
    await response.body.text();
    expect(upstream.requests).toHaveLength(1);
  });

  it("replays with the fresh token and answers the replay's response", async () => {
    accepted = (a) => a === "Bearer stub-token-2";
    const response = await request(`${proxy.url}/echo/x?y=1`, { method: "PUT", body: "payload" });
    expect(response.statusCode).toBe(200);
    const echo = (await response.body.json()) as EchoResponse;
    expect(echo.url).toBe("/echo/x?y=1");
    expect(echo.bodyLength).toBe(7);
    expect(upstream.requests).toHaveLength(2);
    const metric = await proxy.metrics.replaysTotal.get();
    expect(metric.values[0]?.value).toBe(1);
  });
});
