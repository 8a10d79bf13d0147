/**
 * Issue 18: tokenCache.redis takes one Redis (url), a Redis Cluster (clusterNodes) or Sentinel
 * (sentinel) — exactly one — and each mistake is reported at its path without echoing secrets.
 */
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import { issuesOfText, UPSTREAM } from "./load-helpers.js";

const withRedis = (redis: string) => `tokenCache:\n  redis: ${redis}\nupstreams:${UPSTREAM}`;
const messages = async (redis: string) =>
  (await issuesOfText(withRedis(redis))).map((i) => `${i.path}: ${i.message}`);

describe("tokenCache.redis topologies", () => {
  it("reads a cluster's seed URLs as given", async () => {
    const config = await loadConfig({
      configText: withRedis(`{ clusterNodes: ["rediss://u:p@r-0:6379", "rediss://u:p@r-1:6379"] }`),
      env: {},
    });
    expect(config.tokenCache.redis).toEqual({
      clusterNodes: ["rediss://u:p@r-0:6379", "rediss://u:p@r-1:6379"],
      keyPrefix: "bearer-proxy:",
      lockTtlMs: 15_000,
      commandTimeoutMs: 500,
    });
  });

  it("fills in sentinel ports and tls", async () => {
    const config = await loadConfig({
      configText: withRedis(
        `{ sentinel: { masterName: mymaster, nodes: ["s-0:26380", "s-1"], password: pw } }`,
      ),
      env: {},
    });
    expect(config.tokenCache.redis?.sentinel).toEqual({
      masterName: "mymaster",
      nodes: [
        { host: "s-0", port: 26380 },
        { host: "s-1", port: 26379 },
      ],
      username: undefined,
      password: "pw",
      sentinelUsername: undefined,
      sentinelPassword: undefined,
      tls: false,
    });
  });

  it("wants exactly one of url, clusterNodes and sentinel", async () => {
    expect(await messages(`{ keyPrefix: "x:" }`)).toEqual([
      "tokenCache.redis: expected one of url (one Redis), clusterNodes (Redis Cluster) or sentinel (Redis Sentinel), found none (line 2)",
    ]);
    expect(
      await messages(`{ url: "redis://a:6379", sentinel: { masterName: m, nodes: [s:26379] } }`),
    ).toEqual([
      "tokenCache.redis: expected only one of url, clusterNodes and sentinel, found url and sentinel (line 2)",
    ]);
  });

  it("wants cluster URLs with one scheme, one set of credentials and no database", async () => {
    expect(
      await messages(
        `{ clusterNodes: ["redis://:secret-a@r-0:6379", "rediss://:secret-a@r-1:6379", "redis://:secret-b@r-2:6379", "redis://:secret-a@r-3:6379/2"] }`,
      ),
    ).toEqual([
      "tokenCache.redis.clusterNodes[1]: expected redis:// like clusterNodes[0] (one TLS setting applies to every node), found rediss:// (line 2)",
      "tokenCache.redis.clusterNodes[2]: expected the same user and password as clusterNodes[0] (one set applies to every node), found others (line 2)",
      "tokenCache.redis.clusterNodes[3]: expected no database number (a cluster has only database 0), found /2 (line 2)",
    ]);
  });

  it("reports sentinel mistakes at their path and never echoes a password", async () => {
    const found = await messages(
      `{ sentinel: { masterName: "", nodes: ["s-0:99999", "bad host"], password: 12345, tls: "yes" } }`,
    );
    expect(found.join("\n")).not.toContain("12345");
    expect(found).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^tokenCache\.redis\.sentinel\.masterName: /),
        expect.stringMatching(
          /^tokenCache\.redis\.sentinel\.nodes\[1\]: expected a host or host:port/,
        ),
        expect.stringMatching(
          /^tokenCache\.redis\.sentinel\.password: expected a string, found a hidden number/,
        ),
        expect.stringMatching(/^tokenCache\.redis\.sentinel\.tls: expected true or false/),
        "tokenCache.redis.sentinel.nodes[0]: expected a port from 1 to 65535, found 99999 (line 2)",
      ]),
    );
  });
});
