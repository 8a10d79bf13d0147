/** File paths in a config (credentials, TLS) are resolved against the config file's folder. */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import { issuesOfText, removeTempDirs, tempDir } from "./load-helpers.js";

const FIXTURES = resolve(import.meta.dirname, "../fixtures/config");

afterAll(removeTempDirs);

describe("secret and TLS file paths", () => {
  it("resolves paths relative to the config file's folder, whatever the working directory", async () => {
    const config = await loadConfig({
      configFile: join(FIXTURES, "secret-files.yaml"),
      env: {},
      cwd: "/",
    });
    const u = config.upstreams[0]!;
    expect(u.token.clientId).toEqual({ kind: "file", path: join(FIXTURES, "secrets/client-id") });
    expect(u.token.clientSecret).toEqual({
      kind: "file",
      path: join(FIXTURES, "secrets/client-secret"),
    });
    expect(u.tls.caFile).toBe(join(FIXTURES, "secrets/ca.pem"));
    expect(u.token.tls).toBe(u.tls);
  });

  it("resolves a relative configFile against cwd, and its paths against its own folder", async () => {
    const config = await loadConfig({
      configFile: "config/secret-files.yaml",
      env: {},
      cwd: resolve(FIXTURES, ".."),
    });
    expect(config.upstreams[0]?.token.clientId).toEqual({
      kind: "file",
      path: join(FIXTURES, "secrets/client-id"),
    });
  });

  it("uses configFile's folder for configText, and cwd without a file", async () => {
    const dir = tempDir();
    mkdirSync(join(dir, "etc"));
    writeFileSync(join(dir, "etc", "secret"), "s");
    const text =
      "upstreams:\n  - { name: a, baseUrl: 'https://a.example.com', clientId: i, clientSecretFile: secret }\n";
    const viaFile = await loadConfig({
      configText: text,
      configFile: join(dir, "etc", "proxy.yaml"),
      env: {},
    });
    expect(viaFile.upstreams[0]?.token.clientSecret).toEqual({
      kind: "file",
      path: join(dir, "etc", "secret"),
    });
    const viaCwd = await loadConfig({ configText: text, env: {}, cwd: join(dir, "etc") });
    expect(viaCwd.upstreams[0]?.token.clientSecret).toEqual({
      kind: "file",
      path: join(dir, "etc", "secret"),
    });
  });

  it("keeps absolute paths, normalized", async () => {
    const text =
      "upstreams:\n  - { name: a, baseUrl: 'https://a.example.com', clientId: i, clientSecretFile: /etc/../etc/hostname }\n";
    const config = await loadConfig({
      configText: text,
      configFile: join(FIXTURES, "x.yaml"),
      env: {},
    });
    expect(config.upstreams[0]?.token.clientSecret).toEqual({
      kind: "file",
      path: "/etc/hostname",
    });
  });

  it("reports a missing file with the absolute path it looked at", async () => {
    const text =
      "upstreams:\n  - { name: a, baseUrl: 'https://a.example.com', clientId: i, clientSecretFile: secrets/nope }\n";
    expect(await issuesOfText(text, { configFile: join(FIXTURES, "x.yaml") })).toEqual([
      {
        path: "upstreams[0] (a).clientSecretFile",
        message: `expected a readable file, found nothing at ${join(FIXTURES, "secrets/nope")} (line 2)`,
      },
    ]);
  });

  it("never reads the secret into the config (files are re-read by the token source)", async () => {
    const config = await loadConfig({ configFile: join(FIXTURES, "secret-files.yaml"), env: {} });
    expect(JSON.stringify(config)).not.toContain("fixture-secret");
  });
});
