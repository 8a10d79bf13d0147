import { request } from "undici";
import { beforeEach, describe, expect, it } from "vitest";
import { SCRIPTING_PREVIEW_HEADER } from "../../src/config/api-versions.js";
import { fetchEmulatorToken, useEmulator, useEmulatorAgent } from "../helpers/emulator.js";

const START_MS = Date.UTC(2026, 9, 1, 12, 0, 0);
const PREVIEW = { "x-version": SCRIPTING_PREVIEW_HEADER };

describe("API routes demand exactly one valid bearer token for their version", () => {
  let nowMs = START_MS;
  const emulator = useEmulator({ now: () => nowMs }, { each: true });
  const agent = useEmulatorAgent(emulator, { each: true });
  beforeEach(() => {
    nowMs = START_MS;
  });

  async function get(path: string, headers: Record<string, string | string[]>) {
    const response = await request(`${emulator().url}${path}`, { dispatcher: agent(), headers });
    return {
      status: response.statusCode,
      headers: response.headers,
      json: (await response.body.json()) as Record<string, unknown>,
    };
  }

  it("serves the default version's spreadsheet with a default token", async () => {
    const token = await fetchEmulatorToken(emulator(), agent());
    const answer = await get("/platform/v1/spreadsheets/sheet%201?fields=all", {
      authorization: `Bearer ${token}`,
    });
    expect(answer.status).toBe(200);
    expect(answer.json).toMatchObject({ id: "sheet 1", title: "Spreadsheet sheet 1" });
    expect(Array.isArray(answer.json.sheets)).toBe(true);
  });

  it("serves the preview's scripts with a preview token and the X-Version header", async () => {
    const token = await fetchEmulatorToken(emulator(), agent(), { preview: true });
    const answer = await get("/scripts", { authorization: `Bearer ${token}`, ...PREVIEW });
    expect(answer.status).toBe(200);
    expect(Array.isArray(answer.json.scripts)).toBe(true);
  });

  it("refuses malformed Authorization headers with 401 invalid_token", async () => {
    const token = await fetchEmulatorToken(emulator(), agent());
    const malformed: (string | string[] | undefined)[] = [
      undefined,
      `Bearer  ${token}`,
      `bearer ${token}`,
      `BEARER ${token}`,
      `Bearer\t${token}`,
      token,
      `Bearer ${token} extra`,
      `Bearer ${token}x`,
      `Basic ${token}`,
      "Bearer ",
      [`Bearer ${token}`, `Bearer ${token}`],
    ];
    emulator().resetStats();
    for (const authorization of malformed) {
      const answer = await get(
        "/platform/v1/spreadsheets/1",
        authorization === undefined ? {} : { authorization },
      );
      expect(answer.status, String(authorization)).toBe(401);
      expect(answer.headers["www-authenticate"]).toBe('Bearer error="invalid_token"');
      expect(answer.json.error).toBe("invalid_token");
      expect(typeof answer.json.error_description).toBe("string");
      expect(JSON.stringify(answer.json)).not.toContain(token);
    }
    expect(emulator().stats()).toMatchObject({
      apiRequests: malformed.length,
      unauthorized: malformed.length,
    });
  });

  it("refuses a token once it has expired by the injected clock", async () => {
    emulator().setTokenLifetime(60);
    const token = await fetchEmulatorToken(emulator(), agent());
    nowMs += 59_000;
    expect(
      (await get("/platform/v1/spreadsheets/1", { authorization: `Bearer ${token}` })).status,
    ).toBe(200);
    nowMs += 1_000;
    const answer = await get("/platform/v1/spreadsheets/1", { authorization: `Bearer ${token}` });
    expect(answer.status).toBe(401);
    expect(answer.json.error_description).toBe("token expired");
  });

  it("expires default tokens 600 s after issue", async () => {
    const token = await fetchEmulatorToken(emulator(), agent());
    nowMs += 599_999;
    expect(
      (await get("/platform/v1/spreadsheets/1", { authorization: `Bearer ${token}` })).status,
    ).toBe(200);
    nowMs += 1;
    expect(
      (await get("/platform/v1/spreadsheets/1", { authorization: `Bearer ${token}` })).status,
    ).toBe(401);
  });

  it("refuses every token issued before revokeAllTokens, and accepts new ones", async () => {
    const before = await fetchEmulatorToken(emulator(), agent());
    emulator().revokeAllTokens();
    const answer = await get("/platform/v1/spreadsheets/1", { authorization: `Bearer ${before}` });
    expect(answer.status).toBe(401);
    expect(answer.json.error_description).toBe("token revoked");
    const after = await fetchEmulatorToken(emulator(), agent());
    expect(
      (await get("/platform/v1/spreadsheets/1", { authorization: `Bearer ${after}` })).status,
    ).toBe(200);
  });

  it("refuses tokens of another emulator and tampered tokens", async () => {
    const token = await fetchEmulatorToken(emulator(), agent());
    const [header, payload, signature] = token.split(".") as [string, string, string];
    const claims = JSON.parse(Buffer.from(payload, "base64url").toString());
    const forged = `${header}.${Buffer.from(JSON.stringify({ ...claims, exp: claims.exp + 3600 })).toString("base64url")}.${signature}`;
    const answer = await get("/platform/v1/spreadsheets/1", { authorization: `Bearer ${forged}` });
    expect(answer.status).toBe(401);
    expect(answer.json.error_description).toBe("token not issued by this emulator");
    const unsigned = `${Buffer.from('{"alg":"none","typ":"JWT"}').toString("base64url")}.${payload}.`;
    expect(
      (await get("/platform/v1/spreadsheets/1", { authorization: `Bearer ${unsigned}` })).json
        .error_description,
    ).toBe("malformed token");
  });

  it("refuses a token issued for the other API version", async () => {
    const defaultToken = await fetchEmulatorToken(emulator(), agent());
    const previewToken = await fetchEmulatorToken(emulator(), agent(), { preview: true });
    const scripts = await get("/scripts", { authorization: `Bearer ${defaultToken}`, ...PREVIEW });
    expect(scripts.status).toBe(401);
    expect(scripts.json.error_description).toMatch(/^token issued for another API version/);
    const sheet = await get("/platform/v1/spreadsheets/1", {
      authorization: `Bearer ${previewToken}`,
    });
    expect(sheet.status).toBe(401);
  });

  it("answers 400 when the X-Version header does not fit the route", async () => {
    const previewToken = await fetchEmulatorToken(emulator(), agent(), { preview: true });
    const defaultToken = await fetchEmulatorToken(emulator(), agent());
    expect((await get("/scripts", { authorization: `Bearer ${previewToken}` })).status).toBe(400);
    expect(
      (
        await get("/scripts", {
          authorization: `Bearer ${previewToken}`,
          "x-version": "2022-01-01",
        })
      ).status,
    ).toBe(400);
    const sheet = await get("/platform/v1/spreadsheets/1", {
      authorization: `Bearer ${defaultToken}`,
      ...PREVIEW,
    });
    expect(sheet.status).toBe(400);
    expect(sheet.json.error).toBe("invalid_version");
  });

  it("answers 404 for unknown paths and 405 for other methods", async () => {
    const token = await fetchEmulatorToken(emulator(), agent());
    const missing = await get("/platform/v1/nothing", { authorization: `Bearer ${token}` });
    expect(missing.status).toBe(404);
    expect(missing.json.error).toBe("not_found");
    const response = await request(`${emulator().url}/platform/v1/spreadsheets/1`, {
      method: "DELETE",
      dispatcher: agent(),
      headers: { authorization: `Bearer ${token}` },
    });
    expect(response.statusCode).toBe(405);
    expect(response.headers.allow).toBe("GET");
    await response.body.dump();
  });
});

describe("setTokenLifetime", () => {
  const emulator = useEmulator();
  const agent = useEmulatorAgent(emulator);

  it("changes expires_in of later tokens and refuses nonsense", async () => {
    emulator().setTokenLifetime(120);
    const response = await request(`${emulator().url}/iam/v1/oauth2/token`, {
      method: "POST",
      dispatcher: agent(),
      headers: { "content-type": "application/json" },
      body: '{"grant_type":"client_credentials","client_id":"demo-client","client_secret":"demo-secret"}',
    });
    expect(await response.body.json()).toMatchObject({ expires_in: 119 });
    expect(() => emulator().setTokenLifetime(0)).toThrow(RangeError);
    expect(() => emulator().setTokenLifetime(1.5)).toThrow(RangeError);
  });
});
