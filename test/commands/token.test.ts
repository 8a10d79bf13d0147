import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runToken } from "../../src/commands/token.js";
import { undiciAgentFor, useEmulator } from "../helpers/emulator.js";
import { capture, configFor, emulatorUpstream } from "./helpers.js";

const SECRET = "token-cmd-secret-8d3f";
const WRONG_SECRET = "wrong-secret-value-1a7c";

describe("bearer-proxy token", () => {
  const emulator = useEmulator({ clients: [{ clientId: "cli-client", clientSecret: SECRET }] });
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "bp-token-cmd-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  async function run(config: Parameters<typeof runToken>[0]["config"], upstream?: string) {
    const stdout = capture();
    const stderr = capture();
    const code = await runToken({ config, upstream, stdout: stdout.stream, stderr: stderr.stream });
    return { code, stdout: stdout.text(), stderr: stderr.text() };
  }

  async function apiStatus(token: string, path: string, headers: Record<string, string> = {}) {
    const agent = undiciAgentFor(emulator());
    try {
      const res = await request(`${emulator().url}${path}`, {
        dispatcher: agent,
        headers: { authorization: `Bearer ${token}`, ...headers },
      });
      await res.body.dump();
      return res.statusCode;
    } finally {
      await agent.close();
    }
  }

  it("prints only a fresh, working token on stdout", async () => {
    const config = configFor(
      emulatorUpstream(emulator(), { clientId: "cli-client", clientSecret: SECRET }),
    );
    const before = emulator().stats().tokenRequests.total;
    const { code, stdout, stderr } = await run(config);
    expect(stderr).toBe("");
    expect(code).toBe(0);
    expect(stdout).toMatch(/^[A-Za-z0-9\-._~+/]+=*\n$/);
    expect(emulator().stats().tokenRequests.total).toBe(before + 1);
    expect(await apiStatus(stdout.trim(), "/platform/v1/spreadsheets/abc")).toBe(200);
  });

  it("fetches from the named upstream, here the scripting preview with X-Version", async () => {
    const file = join(dir, "secret");
    writeFileSync(file, `${SECRET}\n`);
    const fromFile = emulatorUpstream(emulator(), {
      name: "scripts",
      preview: true,
      clientId: "cli-client",
    });
    const config = configFor(
      emulatorUpstream(emulator(), { name: "files", clientId: "cli-client", clientSecret: SECRET }),
      { ...fromFile, token: { ...fromFile.token, clientSecret: { kind: "file", path: file } } },
    );
    const before = emulator().stats().tokenRequests.preview;
    const { code, stdout } = await run(config, "scripts");
    expect(code).toBe(0);
    expect(emulator().stats().tokenRequests.preview).toBe(before + 1);
    expect(
      await apiStatus(stdout.trim(), "/scripts", { "x-version": "2026-09-01.scripting.preview" }),
    ).toBe(200);
  });

  it("asks for --upstream when several are configured, listing them", async () => {
    const config = configFor(
      emulatorUpstream(emulator(), { name: "files" }),
      emulatorUpstream(emulator(), { name: "scripts", preview: true }),
    );
    const missing = await run(config);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toBe("");
    expect(missing.stderr).toBe(
      "bearer-proxy token: several upstreams are configured; choose one with --upstream NAME: files, scripts\n",
    );
    const unknown = await run(config, "sheets");
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toBe(
      'bearer-proxy token: no upstream named "sheets"; configured: files, scripts\n',
    );
  });

  it("reports a rejected secret on stderr without the secret, and prints nothing on stdout", async () => {
    const config = configFor(
      emulatorUpstream(emulator(), { clientId: "cli-client", clientSecret: WRONG_SECRET }),
    );
    const { code, stdout, stderr } = await run(config);
    expect(code).toBe(1);
    expect(stdout).toBe("");
    expect(stderr).toContain("bearer-proxy token: upstream emu: token endpoint");
    expect(stderr).toContain("answered 401 (invalid_client");
    expect(stderr).not.toContain(WRONG_SECRET);
    expect(stderr).not.toContain(SECRET);
  });

  it("reports an unreadable secret file", async () => {
    const upstream = emulatorUpstream(emulator());
    const path = join(dir, "missing-secret");
    const config = configFor({
      ...upstream,
      token: { ...upstream.token, clientSecret: { kind: "file", path } },
    });
    const { code, stdout, stderr } = await run(config);
    expect(code).toBe(1);
    expect(stdout).toBe("");
    expect(stderr).toContain(`cannot read clientSecretFile ${path} (ENOENT)`);
  });
});
