import type { Dispatcher } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { BearerProxyError } from "../../src/errors.js";
import type { TokenProvider } from "../../src/token/token-provider.js";
import { createTokenSource } from "../../src/token/token-source.js";
import { useEmulator } from "../helpers/emulator.js";
import { callApi, emulatorSpec, tokenDispatcher, type Version } from "./emulator-support.js";
import { captureLogs, DEFAULT_POLICY, TEST_SECRET } from "./helpers.js";

// Real token requests over TLS to the emulator (src/emulator), on 127.0.0.1 and a free port.
const SPECIAL_CLIENT = { clientId: "special client+1", clientSecret: TEST_SECRET };
const emulator = useEmulator({
  clients: [{ clientId: "demo-client", clientSecret: "demo-secret" }, SPECIAL_CLIENT],
});

const opened: { source: TokenProvider; dispatcher: Dispatcher }[] = [];
afterEach(async () => {
  for (const { source, dispatcher } of opened.splice(0)) {
    source.close();
    await dispatcher.close();
  }
  emulator().setTokenFault(undefined);
});

// Failure cases: the first retry (>= 5 s) lies beyond the wait bound, so a request fails as soon
// as the first attempt does instead of waiting through retries.
const FAIL_FAST = { ...DEFAULT_POLICY, waitTimeoutMs: 3_000, minRefreshIntervalMs: 5_000 };

function open(spec: ReturnType<typeof emulatorSpec>, policy = DEFAULT_POLICY) {
  const dispatcher = tokenDispatcher(spec.tls);
  const logs = captureLogs();
  const source = createTokenSource({
    upstream: "emu",
    spec,
    policy,
    dispatcher,
    logger: logs.logger,
  });
  opened.push({ source, dispatcher });
  return { source, dispatcher, logs };
}

describe("token requests against the emulator over TLS", () => {
  const combos: [Version, "form" | "json", "body" | "basic"][] = [];
  for (const version of ["default", "preview"] as const)
    for (const format of ["form", "json"] as const)
      for (const clientAuth of ["body", "basic"] as const)
        combos.push([version, format, clientAuth]);

  it.each(combos)(
    "%s version, %s encoding, %s client auth",
    async (version, format, clientAuth) => {
      const before = emulator().stats().tokenRequests;
      const { source, dispatcher } = open(
        emulatorSpec(emulator(), version, { format, clientAuth }),
      );
      const token = await source.getToken();
      expect(token.lifetimeMs).toBe(599_000);
      expect(token.scope).toBe("files:read files:write");
      expect(await callApi(emulator(), dispatcher, version, token.value)).toBe(200);
      const after = emulator().stats().tokenRequests;
      expect(after.total - before.total).toBe(1);
      expect(after.rejected - before.rejected).toBe(0);
      expect(after[format] - before[format]).toBe(1);
      expect(after.basic - before.basic).toBe(clientAuth === "basic" ? 1 : 0);
      expect(after[version] - before[version]).toBe(1);
    },
  );

  it.each([
    ["form", "body"],
    ["form", "basic"],
    ["json", "body"],
  ] as const)("a secret with + & = %% space é 🙂 works (%s, %s)", async (format, clientAuth) => {
    const spec = emulatorSpec(emulator(), "default", {
      format,
      clientAuth,
      clientId: { kind: "inline", value: SPECIAL_CLIENT.clientId },
      clientSecret: { kind: "inline", value: SPECIAL_CLIENT.clientSecret },
    });
    const { source } = open(spec);
    expect((await source.getToken()).value.length).toBeGreaterThan(20);
  });

  it("a wrong secret is token_rejected with the IdP's invalid_client, and the log says what to check", async () => {
    const spec = emulatorSpec(emulator(), "default", {
      clientSecret: { kind: "inline", value: "wrong-secret" },
    });
    const { source, logs } = open(spec, FAIL_FAST);
    const error = (await source.getToken().catch((e) => e)) as BearerProxyError;
    expect(error).toBeInstanceOf(BearerProxyError);
    expect(error.code).toBe("BP_ERR_TOKEN_REJECTED");
    expect(error.message).toContain("invalid_client");
    expect(error.message).not.toContain("wrong-secret");
    expect(logs.text()).toContain("check clientId/clientSecret");
    expect(logs.text()).not.toContain("wrong-secret");
  });

  it("certificate verification is on: without the emulator's CA the request fails", async () => {
    const spec = emulatorSpec(emulator(), "default", {
      tls: { caFile: undefined, certFile: undefined, keyFile: undefined, serverName: undefined },
    });
    const { source } = open(spec, FAIL_FAST);
    const error = (await source.getToken().catch((e) => e)) as BearerProxyError;
    expect(error.code).toBe("BP_ERR_TOKEN_UNAVAILABLE");
    expect(error.message).toMatch(/certificate|CERT|self-signed|unable to verify/i);
  });

  it("after the upstream revokes tokens, invalidate() gets a fresh one that works", async () => {
    const { source, dispatcher } = open(emulatorSpec(emulator(), "default"), {
      ...DEFAULT_POLICY,
      minAgeBeforeInvalidateMs: 0,
      minRefreshIntervalMs: 0,
    });
    const first = await source.getToken();
    emulator().revokeAllTokens();
    expect(await callApi(emulator(), dispatcher, "default", first.value)).toBe(401);
    expect(source.invalidate(first)).toBe(true);
    const second = await source.getToken();
    expect(second.value).not.toBe(first.value);
    expect(await callApi(emulator(), dispatcher, "default", second.value)).toBe(200);
  });

  it("faults from a real server: a 307 is not followed, a 503 HTML page honours Retry-After", async () => {
    const { source } = open(emulatorSpec(emulator(), "default"), FAIL_FAST);
    emulator().setTokenFault((_req, res) => {
      res.writeHead(307, { location: "https://127.0.0.1:1/steal" }).end();
    });
    const redirect = (await source.getToken().catch((e) => e)) as BearerProxyError;
    expect(redirect.details).toMatchObject({ status: 307 });
    expect(redirect.message).toContain("answered 307");
    expect(redirect.message).not.toContain("steal");

    const other = open(emulatorSpec(emulator(), "preview"), FAIL_FAST).source;
    emulator().setTokenFault((_req, res) => {
      res.writeHead(503, { "content-type": "text/html", "retry-after": "9" }).end("<h1>down</h1>");
    });
    const down = (await other.getToken().catch((e) => e)) as BearerProxyError;
    expect(down.code).toBe("BP_ERR_TOKEN_UNAVAILABLE");
    expect(down.retryAfterSeconds).toBeGreaterThanOrEqual(9);
    expect(down.message).toContain("answered 503 (content type text/html)");
  });
});
