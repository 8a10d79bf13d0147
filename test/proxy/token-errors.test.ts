import { request } from "undici";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { useEmulator } from "../helpers/emulator.js";
import { type FakeUpstream, startFakeUpstream } from "../helpers/fake-upstreams.js";
import { createTestPki } from "../helpers/tls.js";
import { startTestProxy, type TestProxy } from "./harness.js";
import { createStubTokens, tokenRejected, tokenUnavailable } from "./stub-tokens.js";

/** When no token can be had, clients get the documented codes; nothing is forwarded. */
describe("token failures reach clients as token_unavailable / token_rejected", () => {
  const emulator = useEmulator({}, { each: true });
  let proxy: TestProxy;

  beforeEach(async () => {
    proxy = await startTestProxy({
      caPem: emulator().caPem,
      tokens: "real",
      config: {
        upstreams: [
          {
            name: "api",
            baseUrl: emulator().url,
            token: { waitTimeout: "2s", initialBackoff: "200ms" },
          },
        ],
      },
    });
  });
  afterEach(() => proxy.close());

  async function get(path: string) {
    const response = await request(`${proxy.url}${path}`);
    return {
      status: response.statusCode,
      headers: response.headers,
      json: (await response.body.json()) as { error: Record<string, unknown> },
    };
  }

  it("token endpoint failing (503 + Retry-After) → 503 token_unavailable with Retry-After", async () => {
    emulator().setTokenFault((_req, res) => {
      res.writeHead(503, { "retry-after": "7", "content-type": "text/html" });
      res.end("<html>down</html>");
    });
    const answer = await get("/echo/x");
    expect(answer.status).toBe(503);
    expect(answer.headers["bearer-proxy-error"]).toBe("token_unavailable");
    expect(Number(answer.headers["retry-after"])).toBeGreaterThanOrEqual(1);
    expect(answer.json.error).toMatchObject({ code: "token_unavailable", upstream: "api" });
    expect(emulator().stats().apiRequests).toBe(0);
  });

  it("token endpoint unreachable (connection reset) → 503 token_unavailable", async () => {
    emulator().setTokenFault((req) => req.socket.destroy());
    const answer = await get("/echo/x");
    expect(answer.status).toBe(503);
    expect(answer.headers["bearer-proxy-error"]).toBe("token_unavailable");
    expect(answer.headers["retry-after"]).toBeDefined();
  });

  it("invalid_client → 502 token_rejected, secret never echoed", async () => {
    emulator().setClients([{ clientId: "demo-client", clientSecret: "rotated-elsewhere" }]);
    const answer = await get("/echo/x");
    expect(answer.status).toBe(502);
    expect(answer.headers["bearer-proxy-error"]).toBe("token_rejected");
    expect(JSON.stringify(answer.json)).not.toContain("demo-secret");
    expect(emulator().stats().apiRequests).toBe(0);
  });
});

describe("token errors from the provider, exactly mapped", () => {
  let upstream: FakeUpstream;
  let proxy: TestProxy;
  const tokens = createStubTokens();

  beforeEach(async () => {
    const pki = await createTestPki();
    upstream = await startFakeUpstream({ cert: pki.good });
    proxy = await startTestProxy({
      caPem: pki.caPem,
      tokens: { u: tokens },
      config: { upstreams: [{ name: "u", baseUrl: upstream.origin }] },
    });
  });
  afterEach(async () => {
    tokens.failWith(undefined);
    await proxy.close();
    await upstream.close();
  });

  it("unavailable: 503 and the provider's Retry-After; the request body is not read", async () => {
    tokens.failWith(tokenUnavailable(7));
    const response = await request(`${proxy.url}/echo/x`, {
      method: "POST",
      body: "x".repeat(2_000_000),
    });
    expect(response.statusCode).toBe(503);
    expect(response.headers["retry-after"]).toBe("7");
    expect(response.headers.connection).toBe("close");
    await response.body.text();
    expect(upstream.requests).toEqual([]);
  });

  it("rejected: 502 token_rejected, no Retry-After", async () => {
    tokens.failWith(tokenRejected());
    const response = await request(`${proxy.url}/echo/x`);
    expect(response.statusCode).toBe(502);
    expect(response.headers["bearer-proxy-error"]).toBe("token_rejected");
    expect(response.headers["retry-after"]).toBeUndefined();
    await response.body.text();
  });
});
