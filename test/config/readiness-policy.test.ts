import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfigWithWarnings } from "../../src/config/load.js";
import { issuesOfText, UPSTREAM, yaml } from "./load-helpers.js";

const CONFIG_DIR = resolve(import.meta.dirname, "../../config");

async function readinessOf(options: { configText?: string; configFile?: string }) {
  const { config } = await loadConfigWithWarnings({ env: {}, ...options });
  return config.readiness;
}

describe("readiness.requireTokens", () => {
  it("defaults to all for one client: the sidecar, and one app on both API versions", async () => {
    for (const file of ["sidecar.yaml", "versions.yaml"]) {
      expect(await readinessOf({ configFile: resolve(CONFIG_DIR, file) })).toEqual({
        requireTokens: "all",
        chosenBy: "one-client",
      });
    }
  });

  it("defaults to none for several clients (a gateway's tenants)", async () => {
    const configText = yaml`
      upstreams:
        - { name: team-a, baseUrl: https://api.example.com, clientId: a, clientSecret: sa, match: { hosts: [a.internal] } }
        - { name: team-b, baseUrl: https://api.example.com, clientId: b, clientSecret: sb, match: { hosts: [b.internal] } }
    `;
    expect(await readinessOf({ configText })).toEqual({
      requireTokens: "none",
      chosenBy: "several-clients",
    });
  });

  it("takes the configured value whatever the shape", async () => {
    const configText = `readiness: { requireTokens: prefetched }\nupstreams:${UPSTREAM}`;
    expect(await readinessOf({ configText })).toEqual({
      requireTokens: "prefetched",
      chosenBy: "config",
    });
  });

  it("rejects an unknown policy with its path and the choices", async () => {
    const issues = await issuesOfText(`readiness: { requireTokens: some }\nupstreams:${UPSTREAM}`);
    expect(issues).toHaveLength(1);
    expect(issues[0]!.path).toBe("readiness.requireTokens");
    expect(issues[0]!.message).toMatch(/all.*prefetched.*none/);
    expect(issues[0]!.message).toContain('"some"');
  });
});
