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
  it("defaults to all for one credential (the sidecar)", async () => {
    expect(await readinessOf({ configFile: resolve(CONFIG_DIR, "sidecar.yaml") })).toEqual({
      requireTokens: "all",
      chosenBy: "one-client",
    });
  });

  it("counts one app on both API versions as two credentials (two token endpoints): none", async () => {
    // Issue 22 item 2: a refused preview version must not take the default version's traffic
    // out of rotation; an app that needs both sets requireTokens: all.
    expect(await readinessOf({ configFile: resolve(CONFIG_DIR, "versions.yaml") })).toEqual({
      requireTokens: "none",
      chosenBy: "several-clients",
    });
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
