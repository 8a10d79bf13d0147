import { request } from "undici";
import { describe, expect, it } from "vitest";
import { SCRIPTING_PREVIEW_HEADER } from "../../src/config/api-versions.js";
import { useEmulator, useEmulatorAgent } from "../helpers/emulator.js";

const FORM = "application/x-www-form-urlencoded;charset=UTF-8";
const NOW_MS = Date.UTC(2026, 9, 1, 12, 0, 0, 250);
// A secret that needs every kind of escaping: '+', '&', '=', '%', ':', space and non-ASCII.
const ODD = { clientId: "odd client:1", clientSecret: "p+s&w=rd% :ü€" };

describe("token endpoint accepts SPEC-conformant requests", () => {
  const emulator = useEmulator({
    now: () => NOW_MS,
    clients: [{ clientId: "demo-client", clientSecret: "demo-secret" }, ODD],
  });
  const agent = useEmulatorAgent(emulator);

  const versions = [
    { name: "default", path: "/iam/v1/oauth2/token", headers: {}, ver: "2022-01-01" },
    {
      name: "preview",
      path: "/oauth2/token",
      headers: { "x-version": SCRIPTING_PREVIEW_HEADER },
      ver: SCRIPTING_PREVIEW_HEADER,
    },
  ] as const;
  const fields = {
    grant_type: "client_credentials",
    client_id: ODD.clientId,
    client_secret: ODD.clientSecret,
  };
  const basic = `Basic ${Buffer.from(`${encodeURIComponent(ODD.clientId)}:${encodeURIComponent(ODD.clientSecret)}`).toString("base64")}`;
  const encodings = [
    {
      name: "form",
      headers: { "content-type": FORM },
      body: new URLSearchParams(fields).toString(),
    },
    { name: "json", headers: { "content-type": "application/json" }, body: JSON.stringify(fields) },
    {
      name: "form + HTTP Basic",
      headers: { "content-type": FORM, authorization: basic },
      body: "grant_type=client_credentials",
    },
    {
      name: "json + HTTP Basic",
      headers: { "content-type": "application/json", authorization: basic },
      body: '{"grant_type":"client_credentials"}',
    },
  ] as const;

  for (const version of versions) {
    for (const encoding of encodings) {
      it(`issues a ${version.name} token for a ${encoding.name} request`, async () => {
        const response = await request(`${emulator().url}${version.path}`, {
          method: "POST",
          dispatcher: agent(),
          headers: { ...version.headers, ...encoding.headers },
          body: encoding.body,
        });
        expect(response.statusCode).toBe(200);
        expect(response.headers["content-type"]).toBe("application/json");
        expect(response.headers["cache-control"]).toBe("no-store");
        const json = (await response.body.json()) as Record<string, unknown>;
        expect(Object.keys(json).sort()).toEqual([
          "access_token",
          "expires_in",
          "scope",
          "token_type",
        ]);
        expect(json).toMatchObject({
          expires_in: 599,
          scope: "files:read files:write",
          token_type: "Bearer",
        });
        const [header, payload, signature] = String(json.access_token).split(".");
        expect(JSON.parse(Buffer.from(header!, "base64url").toString())).toEqual({
          alg: "HS256",
          typ: "JWT",
        });
        expect(signature).toMatch(/^[A-Za-z0-9_-]{43}$/);
        const claims = JSON.parse(Buffer.from(payload!, "base64url").toString());
        const iat = Math.floor(NOW_MS / 1000);
        expect(claims).toMatchObject({
          iat,
          exp: iat + 600,
          client_id: ODD.clientId,
          ver: version.ver,
        });
        expect(claims.jti).toMatch(/^[0-9a-f-]{36}$/);
      });
    }
  }

  it("tolerates case and whitespace around ';' in the form Content-Type, and ignores extra parameters", async () => {
    for (const contentType of [
      "Application/X-WWW-Form-Urlencoded ; Charset=utf-8",
      "application/x-www-form-urlencoded; charset=UTF-8",
    ]) {
      const response = await request(`${emulator().url}/iam/v1/oauth2/token`, {
        method: "POST",
        dispatcher: agent(),
        headers: { "content-type": contentType },
        body: "grant_type=client_credentials&client_id=demo-client&client_secret=demo-secret&audience=x&resource=https%3A%2F%2Fapi&",
      });
      expect(response.statusCode).toBe(200);
      await response.body.dump();
    }
  });

  it("decodes '+' as a space and percent-escapes as UTF-8", async () => {
    const body =
      "grant_type=client_credentials&client_id=odd+client%3A1&client_secret=p%2Bs%26w%3Drd%25+%3A%C3%BC%E2%82%AC";
    const response = await request(`${emulator().url}/iam/v1/oauth2/token`, {
      method: "POST",
      dispatcher: agent(),
      headers: { "content-type": FORM },
      body,
    });
    expect(response.statusCode).toBe(200);
    await response.body.dump();
  });

  it("grants a requested subset of the scope, and the full scope when none is requested", async () => {
    const scopes = {
      "files:read": "files:read",
      "files:write files:read": "files:write files:read",
    };
    for (const [requested, granted] of Object.entries(scopes)) {
      const response = await request(`${emulator().url}/iam/v1/oauth2/token`, {
        method: "POST",
        dispatcher: agent(),
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          grant_type: "client_credentials",
          client_id: "demo-client",
          client_secret: "demo-secret",
          scope: requested,
        }),
      });
      expect(await response.body.json()).toMatchObject({ scope: granted });
    }
  });

  it("accepts a body client_id equal to the HTTP Basic one", async () => {
    const response = await request(`${emulator().url}/iam/v1/oauth2/token`, {
      method: "POST",
      dispatcher: agent(),
      headers: {
        "content-type": FORM,
        authorization: `Basic ${Buffer.from("demo-client:demo-secret").toString("base64")}`,
      },
      body: "grant_type=client_credentials&client_id=demo-client",
    });
    expect(response.statusCode).toBe(200);
    await response.body.dump();
  });

  it("counts requests by path, encoding and Basic auth", async () => {
    emulator().resetStats();
    for (const version of versions) {
      for (const encoding of encodings) {
        const response = await request(`${emulator().url}${version.path}`, {
          method: "POST",
          dispatcher: agent(),
          headers: { ...version.headers, ...encoding.headers },
          body: encoding.body,
        });
        await response.body.dump();
      }
    }
    expect(emulator().stats().tokenRequests).toEqual({
      total: 8,
      default: 4,
      preview: 4,
      form: 4,
      json: 4,
      basic: 4,
      rejected: 0,
    });
  });
});
