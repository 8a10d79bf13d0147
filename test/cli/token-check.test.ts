import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { request } from "undici";
import { describe, expect, it } from "vitest";
import { undiciAgentFor, useEmulator } from "../helpers/emulator.js";
import { createTestPki } from "../helpers/tls.js";
import { JWT, useCliProcesses, useTempDir } from "./helpers.js";

const SECRET = "token-cli-secret-3f9a0d";
const WRONG_SECRET = "wrong-cli-secret-77c2e4";

describe.concurrent("bearer-proxy token and check, as the built CLI", () => {
  const emulator = useEmulator({ clients: [{ clientId: "cli-client", clientSecret: SECRET }] });
  const cli = useCliProcesses({ cleanup: "afterAll" });
  const dir = useTempDir("bp-cli-token-");

  /** One-upstream environment: no config file. */
  function env(overrides: Record<string, string> = {}): Record<string, string> {
    const secretFile = join(dir(), "client_secret");
    writeFileSync(secretFile, `${SECRET}\n`);
    return {
      BEARER_PROXY_BASE_URL: emulator().url,
      BEARER_PROXY_CLIENT_ID: "cli-client",
      BEARER_PROXY_CLIENT_SECRET_FILE: secretFile,
      BEARER_PROXY_CA_FILE: emulator().caFile,
      ...overrides,
    };
  }

  it("token prints exactly one line, a JWT the upstream accepts, and nothing else", async () => {
    const { code, stdout, stderr } = await cli.run(["token"], { env: env() });
    expect(code).toBe(0);
    expect(stderr).toBe("");
    expect(stdout.endsWith("\n")).toBe(true);
    const lines = stdout.slice(0, -1).split("\n");
    expect(lines).toHaveLength(1);
    const token = lines[0] ?? "";
    expect(token).toMatch(JWT);
    const claims = JSON.parse(Buffer.from(token.split(".")[1] ?? "", "base64url").toString()) as {
      exp?: number;
      client_id?: string;
    };
    expect(claims.client_id).toBe("cli-client");
    expect(claims.exp).toBeGreaterThan(Date.now() / 1000);

    const agent = undiciAgentFor(emulator());
    try {
      const response = await request(`${emulator().url}/platform/v1/spreadsheets/from-cli`, {
        dispatcher: agent,
        headers: { authorization: `Bearer ${token}` },
      });
      await response.body.dump();
      expect(response.statusCode).toBe(200);
    } finally {
      await agent.close();
    }
  });

  it("token with a wrong secret exits 1, prints nothing on stdout and never the secret", async () => {
    const { code, stdout, stderr } = await cli.run(["token", "--client-secret", WRONG_SECRET], {
      env: env({ BEARER_PROXY_CLIENT_SECRET_FILE: "" }),
    });
    expect(code).toBe(1);
    expect(stdout).toBe("");
    expect(stderr).toContain("invalid_client");
    expect(stderr).toContain("check clientId/clientSecret");
    expect(stderr).not.toContain(WRONG_SECRET);
    expect(stderr).not.toContain(SECRET);
  });

  it("check passes every step against the emulator, with a probe call", async () => {
    const { code, stdout, stderr } = await cli.run(
      ["check", "--probe-path", "/platform/v1/spreadsheets/probe"],
      { env: env() },
    );
    expect(stderr).toBe("");
    expect(code).toBe(0);
    const steps = stdout.split("\n").filter((l) => /^\s+[✓✗-] /.test(l));
    expect(steps.map((l) => l.trim().split(/\s+/).slice(0, 2).join(" "))).toEqual([
      "✓ DNS",
      "✓ TCP",
      "✓ TLS",
      "✓ token",
      "✓ API",
    ]);
    expect(stdout).toContain("all checks passed");
    expect(stdout).not.toContain(SECRET);
  });

  it("check fails on a wrong CA file, with a hint, and exits 1", async () => {
    const pki = await createTestPki();
    const wrongCa = join(dir(), "wrong-ca.pem");
    writeFileSync(wrongCa, pki.caPem);
    const { code, stdout } = await cli.run(["check"], {
      env: env({ BEARER_PROXY_CA_FILE: wrongCa }),
    });
    expect(code).toBe(1);
    expect(stdout).toMatch(/^\s+✗ TLS +certificate not trusted/m);
    expect(stdout).toMatch(/^\s+hint: .*tls\.caFile/m);
    expect(stdout).toMatch(/^\s+- token +skipped/m);
    expect(stdout).not.toContain("all checks passed");
  });
});
