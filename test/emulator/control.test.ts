import { request } from "undici";
import { describe, expect, it } from "vitest";
import { fetchEmulatorToken, useEmulator, useEmulatorAgent } from "../helpers/emulator.js";

const FORM = "application/x-www-form-urlencoded;charset=UTF-8";

describe("control over HTTP under /_emulator/", () => {
  const emulator = useEmulator();
  const agent = useEmulatorAgent(emulator);

  async function control(method: "GET" | "POST", path: string) {
    const response = await request(`${emulator().url}/_emulator/${path}`, {
      method,
      dispatcher: agent(),
    });
    return {
      status: response.statusCode,
      json: (await response.body.json()) as Record<string, unknown>,
    };
  }

  it("reports, resets stats and counts API requests and 401s", async () => {
    await control("POST", "reset-stats");
    const token = await fetchEmulatorToken(emulator(), agent());
    for (const authorization of [`Bearer ${token}`, "Bearer nope"]) {
      const response = await request(`${emulator().url}/platform/v1/spreadsheets/1`, {
        dispatcher: agent(),
        headers: { authorization },
      });
      await response.body.dump();
    }
    const stats = await control("GET", "stats");
    expect(stats.status).toBe(200);
    expect(stats.json).toEqual({
      tokenRequests: { total: 1, default: 1, preview: 0, form: 1, json: 0, basic: 0, rejected: 0 },
      apiRequests: 2,
      unauthorized: 1,
    });
    expect(stats.json).toEqual(emulator().stats());
    expect((await control("POST", "reset-stats")).status).toBe(200);
    expect(emulator().stats().apiRequests).toBe(0);
  });

  it("revokes tokens", async () => {
    const token = await fetchEmulatorToken(emulator(), agent());
    expect((await control("POST", "revoke")).status).toBe(200);
    const response = await request(`${emulator().url}/platform/v1/spreadsheets/1`, {
      dispatcher: agent(),
      headers: { authorization: `Bearer ${token}` },
    });
    expect(response.statusCode).toBe(401);
    await response.body.dump();
  });

  it("sets the token lifetime and refuses a bad one", async () => {
    expect(await control("POST", "lifetime?seconds=30")).toEqual({
      status: 200,
      json: { tokenLifetimeSeconds: 30 },
    });
    const response = await request(`${emulator().url}/iam/v1/oauth2/token`, {
      method: "POST",
      dispatcher: agent(),
      headers: { "content-type": FORM },
      body: "grant_type=client_credentials&client_id=demo-client&client_secret=demo-secret",
    });
    expect(await response.body.json()).toMatchObject({ expires_in: 29 });
    for (const bad of [
      "lifetime",
      "lifetime?seconds=0",
      "lifetime?seconds=-5",
      "lifetime?seconds=1e3",
    ]) {
      expect((await control("POST", bad)).status, bad).toBe(400);
    }
    emulator().setTokenLifetime(600);
  });

  it("answers 405 to the wrong method and 404 to unknown control routes", async () => {
    expect((await control("POST", "stats")).status).toBe(405);
    expect((await control("GET", "revoke")).status).toBe(405);
    expect((await control("GET", "nothing")).status).toBe(404);
  });
});

describe("control from code", () => {
  const emulator = useEmulator();
  const agent = useEmulatorAgent(emulator);

  it("rotates client secrets with setClients", async () => {
    await fetchEmulatorToken(emulator(), agent());
    emulator().setClients([{ clientId: "demo-client", clientSecret: "rotated" }]);
    await expect(fetchEmulatorToken(emulator(), agent())).rejects.toThrow(/401/);
    await fetchEmulatorToken(emulator(), agent(), { clientSecret: "rotated" });
    expect(() => emulator().setClients([{ clientId: "x", clientSecret: "" }])).toThrow(TypeError);
    emulator().setClients([{ clientId: "demo-client", clientSecret: "demo-secret" }]);
  });

  it("replaces both token endpoints with a fault handler, counts them, and restores", async () => {
    emulator().resetStats();
    emulator().setTokenFault((_req, res) => {
      res.writeHead(503, { "retry-after": "1" });
      res.end("down");
    });
    await expect(fetchEmulatorToken(emulator(), agent())).rejects.toThrow();
    await expect(fetchEmulatorToken(emulator(), agent(), { preview: true })).rejects.toThrow();
    expect(emulator().stats().tokenRequests).toMatchObject({ total: 2, default: 1, preview: 1 });
    emulator().setTokenFault(() => {
      throw new Error("fault handler bug");
    });
    const response = await request(`${emulator().url}/iam/v1/oauth2/token`, {
      method: "POST",
      dispatcher: agent(),
      body: "",
    });
    expect(response.statusCode).toBe(500);
    await response.body.dump();
    emulator().setTokenFault(undefined);
    await fetchEmulatorToken(emulator(), agent());
  });
});
