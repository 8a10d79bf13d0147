import { describe, expect, it } from "vitest";
import { loadConfigWithWarnings } from "../../src/config/load.js";
import { issuesOfText, UPSTREAM, yaml } from "../config/load-helpers.js";

/** Issue 15 items 5 and 8: `upgrades`, `timeouts.upgradeIdle` and `http2` as the loader reads them. */

const load = async (text: string) =>
  (await loadConfigWithWarnings({ configText: text, env: {} })).config;

describe("upgrade and http2 settings", () => {
  it("defaults: WebSocket relayed, 10 minutes idle, HTTP/1.1", async () => {
    const upstream = (await load(`upstreams:${UPSTREAM}`)).upstreams[0]!;
    expect(upstream.upgrades).toEqual(["websocket"]);
    expect(upstream.timeouts.upgradeIdleMs).toBe(600_000);
    expect(upstream.http2).toBe(false);
  });

  it("reads the values given; protocol names are lowercased; [] is allowed", async () => {
    const config = await load(yaml`
      upstreams:
        - name: a
          baseUrl: https://a.example.com
          clientId: id
          clientSecret: secret
          upgrades: [WebSocket, my-proto]
          http2: true
          timeouts: { upgradeIdle: 90s }
        - name: b
          baseUrl: https://b.example.com
          clientId: id
          clientSecret: secret
          match: { pathPrefix: /b }
          upgrades: []
    `);
    expect(config.upstreams[0]).toMatchObject({
      upgrades: ["websocket", "my-proto"],
      http2: true,
      timeouts: { upgradeIdleMs: 90_000 },
    });
    expect(config.upstreams[1]!.upgrades).toEqual([]);
  });

  it("refuses a protocol that is not a token, a duplicate, a non-boolean http2 and a bad duration, with their paths", async () => {
    const issues = await issuesOfText(yaml`
      upstreams:
        - name: a
          baseUrl: https://a.example.com
          clientId: id
          clientSecret: secret
          upgrades: ["web socket", websocket, websocket]
          http2: "yes"
          timeouts: { upgradeIdle: soon }
    `);
    const paths = issues.map((i) => i.path).join("\n");
    expect(paths).toMatch(/upstreams\[0\].*upgrades/);
    expect(paths).toMatch(/upstreams\[0\].*http2/);
    expect(paths).toMatch(/upstreams\[0\].*timeouts\.upgradeIdle/);
  });
});
