/** Every example in config/ loads as-is, with no environment variable set. */
import { readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfigWithWarnings } from "../../src/config/load.js";

const CONFIG_DIR = resolve(import.meta.dirname, "../../config");
const examples = readdirSync(CONFIG_DIR).filter((f) => f.endsWith(".yaml"));

describe("config/ examples", () => {
  it("includes the documented examples", () => {
    expect(examples).toEqual(
      expect.arrayContaining([
        "proxy.example.yaml",
        "sidecar.yaml",
        "gateway.yaml",
        "legacy-tools.yaml",
        "versions.yaml",
      ]),
    );
  });

  it.each(examples)("%s loads with an empty environment and no warnings", async (name) => {
    const { config, warnings } = await loadConfigWithWarnings({
      configFile: join(CONFIG_DIR, name),
      env: {},
    });
    expect(warnings).toEqual([]);
    expect(config.upstreams.length).toBeGreaterThan(0);
    for (const upstream of config.upstreams) {
      expect(upstream.token.tokenUrl).toMatch(/^https:\/\//);
      for (const source of [upstream.token.clientId, upstream.token.clientSecret]) {
        if (source?.kind === "file")
          expect(source.path.startsWith(join(CONFIG_DIR, "secrets"))).toBe(true);
      }
    }
  });

  it("gateway.yaml gives scripts its own listener and shares tokens through Redis", async () => {
    const { config } = await loadConfigWithWarnings({
      configFile: join(CONFIG_DIR, "gateway.yaml"),
      env: {},
    });
    expect(config.tokenCache.redis).toEqual({
      url: "redis://127.0.0.1:6379",
      keyPrefix: "gateway:",
      lockTtlMs: 15_000,
      commandTimeoutMs: 500,
    });
    expect(config.upstreams.map((u) => [u.name, u.listen])).toEqual([
      ["sheets", undefined],
      ["drive", undefined],
      ["scripts", { host: "0.0.0.0", port: 8081 }],
    ]);
    expect(config.upstreams[0]?.match.hosts).toEqual(["sheets.gateway.local:80"]);
  });

  it("versions.yaml derives each version's token endpoint and X-Version", async () => {
    const { config } = await loadConfigWithWarnings({
      configFile: join(CONFIG_DIR, "versions.yaml"),
      env: { API_BASE_URL: "https://api.example.com/" },
    });
    expect(
      config.upstreams.map((u) => [
        u.name,
        u.token.tokenUrl,
        u.versionHeader,
        u.token.versionHeader,
      ]),
    ).toEqual([
      ["platform", "https://api.example.com/iam/v1/oauth2/token", undefined, undefined],
      [
        "scripting",
        "https://api.example.com/oauth2/token",
        "2026-09-01.scripting.preview",
        "2026-09-01.scripting.preview",
      ],
    ]);
  });
});
