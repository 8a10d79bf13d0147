import type { IncomingMessage, ServerResponse } from "node:http";
import { Agent } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type RunningProxy, startProxy } from "../../src/main.js";
import { formEncode } from "../../src/token/client-credentials.js";
import {
  createCapturingLogger,
  type LoadedTestConfig,
  loadTestConfig,
} from "../helpers/app-under-test.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { type CaFiles, useCaFiles } from "../helpers/intercept-ca-files.js";
import { createTestPki, type TestPki } from "../helpers/tls.js";
import { sleep, waitFor } from "../helpers/wait.js";
import { startTokenTap, type TokenTap } from "./support/token-tap.js";
import { type Answer, send } from "./support/traffic.js";

/**
 * Issue 9, "leak nothing": one full life of a proxy — token fetches for three credentials (form
 * body, JSON body, HTTP Basic), an upstream 401 and its replay, a token endpoint that fails
 * (and echoes what it was sent), an `invalid_client`, and a graceful shutdown — with every log
 * line captured at trace level and every response and admin page collected. Then the client
 * secret (in every encoding it ever travelled in) and every token the emulator issued (seen by
 * a tap in front of the token endpoint) must appear nowhere in any of it. The proxy also holds
 * an interception CA (issue 34): its key and the leaf key must appear nowhere either.
 */

/** Characters that break naive encoders: form and URL specials, quotes, backslash, non-ASCII. */
const SECRET = `S3cr3t+/&=%?#;"q'\\<b>é✓ ${"$"}{HOME} end`;
const CLIENT_ID = "leak-test-client";
const SHOT_WHILE = ["healthy", "replay", "endpoint-down", "rejected"] as const;

interface Collected {
  label: string;
  text: string;
}

describe("secrets never leak", () => {
  let pki: TestPki;
  let emulator: Emulator;
  let tap: TokenTap;
  let loaded: LoadedTestConfig;
  let running: RunningProxy;
  let agent: Agent;
  const captured = createCapturingLogger("trace");
  const collected: Collected[] = [];
  const echoedAuthorizations: string[] = [];
  let proxyUrl = "";
  let adminUrl = "";
  const caFiles = useCaFiles("bp-leak-intercept-");
  let interceptCa: CaFiles;
  let leafKeyPem = "";

  function collect(label: string, answer: Answer, { body = true } = {}): Answer {
    collected.push({ label: `${label} headers`, text: JSON.stringify(answer.headers) });
    if (body) collected.push({ label: `${label} body`, text: answer.text });
    return answer;
  }

  async function snapshotAdmin(moment: string): Promise<void> {
    const pages: [string, Record<string, string>][] = [
      ["/status", { accept: "application/json" }],
      ["/status", { accept: "text/html" }],
      ["/metrics", {}],
      ["/readyz", {}],
      ["/livez", {}],
      ["/startup", {}],
      ["/no-such-page", {}],
    ];
    for (const [path, headers] of pages) {
      const answer = await send(`${adminUrl}${path}`, { dispatcher: agent, headers });
      expect(answer.status, `${path} while ${moment}`).toBeGreaterThan(0);
      collect(`admin ${path} ${headers.accept ?? ""} while ${moment}`, answer);
    }
  }

  async function proxied(
    label: string,
    path: string,
    headers: Record<string, string> = {},
  ): Promise<Answer> {
    return collect(label, await send(`${proxyUrl}${path}`, { dispatcher: agent, headers }));
  }

  /** An IdP error page that echoes the request it got: secret (form/JSON/Basic) included. */
  function echoingFailure(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const echoed = `${req.headers.authorization ?? ""} ${Buffer.concat(chunks).toString("utf8")}`;
      const body = JSON.stringify({
        error: "server_error",
        error_description: `cannot process ${echoed}`,
      });
      res.writeHead(500, { "content-type": "application/json", "retry-after": "1" });
      res.end(body);
    });
  }

  beforeAll(async () => {
    pki = await createTestPki();
    emulator = await startTlsEmulator(pki, {
      clients: [{ clientId: CLIENT_ID, clientSecret: SECRET }],
      // expires_in 2 s: several fetches per credential during the scenario.
      tokenLifetimeSeconds: 3,
    });
    tap = await startTokenTap({ target: emulator.url, caPem: pki.caPem, cert: pki.good });
    interceptCa = await caFiles.writeCa("ec-p256");
    const token = {
      minAgeBeforeInvalidate: "100ms",
      timeout: "1s",
      waitTimeout: "1s",
      initialBackoff: "200ms",
      maxBackoff: "1s",
    };
    loaded = await loadTestConfig({
      caPem: pki.caPem,
      files: { "client-secret": `${SECRET}\n`, "client-id": CLIENT_ID },
      config: {
        shutdown: { drainDelay: "100ms", timeout: "1s" },
        intercept: { caCertFile: interceptCa.caCertFile, caKeyFile: interceptCa.caKeyFile },
        upstreams: [
          {
            name: "sheets",
            baseUrl: emulator.url,
            tokenUrl: `${tap.origin}/iam/v1/oauth2/token`,
            clientIdFile: "client-id",
            clientSecretFile: "client-secret",
            token,
            intercept: true,
          },
          {
            name: "scripts",
            baseUrl: emulator.url,
            apiVersion: "scripting-preview",
            tokenUrl: `${tap.origin}/oauth2/token`,
            tokenRequestFormat: "json",
            clientIdFile: "client-id",
            clientSecretFile: "client-secret",
            match: { pathPrefix: "/scripts" },
            token,
          },
          {
            name: "basic",
            baseUrl: emulator.url,
            tokenUrl: `${tap.origin}/iam/v1/oauth2/token`,
            clientAuth: "basic",
            clientIdFile: "client-id",
            clientSecretFile: "client-secret",
            match: { pathPrefix: "/basic/" },
            stripPrefix: true,
            token,
          },
        ],
      },
    });
    running = await startProxy(loaded.config, { logger: captured.logger });
    leafKeyPem = (await running.app.intercept.leaves()!.leafFor(new URL(emulator.url).hostname))
      .keyPem;
    proxyUrl = `http://127.0.0.1:${running.addresses.proxy[0]!.port}`;
    adminUrl = `http://127.0.0.1:${running.addresses.admin.port}`;
    agent = new Agent({ connections: 8 });
    const states = () => [...running.app.tokens.statuses().values()].map((s) => s.state);
    await waitFor(() => states().every((s) => s === "valid"), "both first tokens");

    // 1. Healthy traffic over several token lifetimes; the echo shows what the upstream got.
    const endAtMs = Date.now() + 1_200;
    while (Date.now() < endAtMs) {
      expect((await proxied("sheets", "/platform/v1/spreadsheets/demo")).status).toBe(200);
      expect((await proxied("scripts", "/scripts")).status).toBe(200);
      expect((await proxied("basic", "/basic/platform/v1/spreadsheets/demo")).status).toBe(200);
      // The echo body is the upstream's (it shows the token it received): only headers count.
      const echo = await send(`${proxyUrl}/echo/leak`, {
        dispatcher: agent,
        headers: { authorization: "Bearer client-sent-value" },
      });
      collect("echo", echo, { body: false });
      const received = (JSON.parse(echo.text) as { headers: [string, string][] }).headers;
      echoedAuthorizations.push(
        ...received.filter(([n]) => n.toLowerCase() === "authorization").map(([, v]) => v),
      );
      await sleep(50);
    }
    await snapshotAdmin(SHOT_WHILE[0]);

    // 2. The upstream rejects the current token: invalidate, fetch, replay once. (A refresh
    // landing at the same moment may hand the replay another revoked token, and the 401 then
    // stands by design: revoke and try again until a replay went through.)
    const replays = () =>
      captured.records.filter((r) => r.msg === "request" && r.replayed === true);
    for (let i = 0; i < 5 && replays().length === 0; i++) {
      await sleep(150);
      emulator.revokeAllTokens();
      await proxied("after revoke", "/platform/v1/spreadsheets/demo");
    }
    expect(replays()[0]).toMatchObject({ status: 200 });
    await snapshotAdmin(SHOT_WHILE[1]);

    // 3. The token endpoint fails, echoing the secret back; requests fail once tokens expire.
    emulator.setTokenFault(echoingFailure);
    const routes: [string, string][] = [
      ["sheets", "/platform/v1/spreadsheets/demo"],
      ["scripts", "/scripts"],
      ["basic", "/basic/platform/v1/spreadsheets/demo"],
    ];
    // Until every credential's token has expired after the IdP's echo was read.
    const told = new Set<string>();
    const givesUpAtMs = Date.now() + 8_000;
    while (told.size < routes.length && Date.now() < givesUpAtMs) {
      for (const [name, path] of routes) {
        const answer = await proxied(`endpoint down (${name})`, path);
        const lastError = running.app.tokens.statuses().get(name)?.lastError?.message ?? "";
        if (answer.code === "token_unavailable" && lastError.includes("answered 500"))
          told.add(name);
      }
      await sleep(100);
    }
    expect([...told].sort()).toEqual(["basic", "scripts", "sheets"]);
    await snapshotAdmin(SHOT_WHILE[2]);

    // 4. The IdP no longer accepts the secret.
    emulator.setTokenFault(undefined);
    emulator.setClients([{ clientId: CLIENT_ID, clientSecret: "replaced-by-the-idp" }]);
    await waitFor(
      async () =>
        (await proxied("rejected", "/platform/v1/spreadsheets/demo")).code === "token_rejected",
      "token_rejected",
      5_000,
    );
    await proxied("rejected (preview)", "/scripts");
    await proxied("rejected (basic)", "/basic/platform/v1/spreadsheets/demo");
    await snapshotAdmin(SHOT_WHILE[3]);

    // 5. Graceful shutdown.
    expect(await running.shutdown("test")).toBe(0);
  });

  afterAll(async () => {
    await agent?.close();
    await running?.shutdown("cleanup");
    await tap?.close();
    await emulator?.close();
    loaded?.cleanup();
  });

  /** The secret as configured, and every token the emulator issued (and their parts). */
  function secretAndTokens(): { name: string; value: string }[] {
    const values = [{ name: "secret", value: SECRET }];
    for (const [i, token] of tap.issuedTokens().entries()) {
      values.push({ name: `token #${i}`, value: token });
      // A truncated token is still a leak: its payload and signature are unique to it.
      for (const [p, part] of token.split(".").slice(1).entries()) {
        values.push({ name: `token #${i} part ${p + 1}`, value: part });
      }
    }
    return values;
  }

  /** The interception CA's key and the leaf key, each line of their PEM (a chunk is a leak). */
  function interceptKeys(): { name: string; value: string }[] {
    const lines = (name: string, pem: string) =>
      pem
        .split("\n")
        .filter((line) => line !== "" && !line.startsWith("-----"))
        .map((value, i) => ({ name: `${name} line ${i + 1}`, value }));
    return [...lines("interception CA key", interceptCa.keyPem), ...lines("leaf key", leafKeyPem)];
  }

  /** The secret as it travelled to the IdP, which a broken IdP may echo back in an error. */
  function secretAsSent(): { name: string; value: string }[] {
    const basic = Buffer.from(`${formEncode(CLIENT_ID)}:${formEncode(SECRET)}`).toString("base64");
    return [
      { name: "secret, form-encoded (token request body)", value: formEncode(SECRET) },
      { name: "secret, percent-encoded", value: encodeURIComponent(SECRET) },
      {
        name: "secret, JSON-escaped (JSON token request body)",
        value: JSON.stringify(SECRET).slice(1, -1),
      },
      { name: "Basic client credentials (token request header)", value: basic },
    ];
  }

  /** A value as it would appear inside the haystacks: raw, in a JSON string, in HTML. */
  function appearances(value: string): string[] {
    const json = (text: string) => JSON.stringify(text).slice(1, -1);
    const html = (text: string) =>
      text
        .replaceAll("&", "&amp;")
        .replaceAll("<", "&lt;")
        .replaceAll(">", "&gt;")
        .replaceAll('"', "&quot;")
        .replaceAll("'", "&#39;");
    return [...new Set([value, json(value), html(value), json(html(value))])];
  }

  function findLeaks(needles: { name: string; value: string }[], haystacks: Collected[]): string[] {
    const leaks: string[] = [];
    for (const { name, value } of needles) {
      for (const form of appearances(value)) {
        for (const { label, text } of haystacks) {
          if (text.includes(form)) leaks.push(`${name} in ${label}: ${text.slice(0, 300)}`);
        }
      }
    }
    return leaks;
  }

  const HAYSTACKS: [string, () => Collected[]][] = [
    ["log lines", () => captured.lines.map((text, i) => ({ label: `log line ${i}`, text }))],
    [
      "proxy responses (status, headers, bodies)",
      () => collected.filter((c) => !c.label.startsWith("admin")),
    ],
    [
      "admin pages (/status JSON and HTML, /metrics, /readyz, …)",
      () => collected.filter((c) => c.label.startsWith("admin")),
    ],
  ];

  it("the scenario exercised what it claims", () => {
    const messages = captured.records.map((r) => String(r.msg));
    expect(tap.issuedTokens().length).toBeGreaterThanOrEqual(4);
    // The tap saw the tokens actually used: the upstream received one of them, never the client's.
    expect(echoedAuthorizations.length).toBeGreaterThan(0);
    for (const value of echoedAuthorizations)
      expect(tap.issuedTokens().map((t) => `Bearer ${t}`)).toContain(value);
    expect(messages).toContain("token fetched");
    expect(messages).toContain("token invalidated after an upstream 401");
    expect(captured.records.some((r) => r.msg === "request" && r.replayed === true)).toBe(true);
    expect(messages.some((m) => m.includes("invalid_client"))).toBe(true);
    expect(messages).toContain("stopped");
    expect(collected.some((c) => c.text.includes("token_unavailable"))).toBe(true);
    expect(collected.some((c) => c.text.includes("token_rejected"))).toBe(true);
    // The failing IdP's echo reached the error path (so its redaction is really tested).
    expect(captured.lines.some((l) => l.includes("cannot process"))).toBe(true);
    // The interception CA was loaded and shown: its absence below means something.
    expect(messages.some((m) => m.startsWith("CONNECT interception with CA"))).toBe(true);
    expect(collected.some((c) => c.text.includes("CONNECT interception"))).toBe(true);
    expect(interceptKeys().length).toBeGreaterThan(4);
  });

  it.each(HAYSTACKS)("no secret and no token in the %s", (_name, haystacks) => {
    expect(haystacks().length).toBeGreaterThan(5);
    expect(findLeaks(secretAndTokens(), haystacks())).toEqual([]);
  });

  it.each(HAYSTACKS)("no interception key (CA or leaf) in the %s", (_name, haystacks) => {
    expect(findLeaks(interceptKeys(), haystacks())).toEqual([]);
  });

  // An IdP that echoes the request in error_description hands back the secret encoded as it was
  // sent: form-encoded or JSON-escaped in the body, or base64 in the Basic header. Redacting
  // only the raw secret misses all three.
  it.each(HAYSTACKS)(
    "no secret echoed back by the IdP (form, JSON or Basic encoded) in the %s",
    (_name, haystacks) => {
      expect(findLeaks(secretAsSent(), haystacks())).toEqual([]);
    },
  );
});
