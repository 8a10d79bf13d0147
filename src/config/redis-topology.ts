/**
 * Where the shared token cache's Redis is (tokenCache.redis): one node (`url`), a Redis Cluster
 * (`clusterNodes`) or a master found through Sentinel (`sentinel`). The schema checks each form;
 * this file checks what it can't (exactly one form, cluster URLs that node-redis can use) and
 * turns the sentinel form into addresses.
 */
import { type IssueList, type IssuePath, isObject } from "./issues.js";
import type { RedisSentinelConfig } from "./proxy-config.js";
import type { ConfigFile } from "./schema.js";

/** Sentinel's own default port (redis.io sentinel docs). */
export const DEFAULT_SENTINEL_PORT = 26379;

const FORMS = ["url", "clusterNodes", "sentinel"] as const;
const AT: IssuePath = ["tokenCache", "redis"];

type SentinelFile = NonNullable<NonNullable<ConfigFile["tokenCache"]>["redis"]>["sentinel"];

/** `tokenCache.redis.sentinel` as the cache uses it: ports filled in, tls a boolean. */
export function normalizeSentinel(file: NonNullable<SentinelFile>): RedisSentinelConfig {
  return {
    masterName: file.masterName,
    nodes: file.nodes.map(parseHostPort),
    username: file.username,
    password: file.password,
    sentinelUsername: file.sentinelUsername,
    sentinelPassword: file.sentinelPassword,
    tls: file.tls ?? false,
  };
}

function parseHostPort(text: string): { host: string; port: number } {
  const colon = text.lastIndexOf(":");
  if (colon === -1) return { host: text, port: DEFAULT_SENTINEL_PORT };
  return { host: text.slice(0, colon), port: Number(text.slice(colon + 1)) };
}

/** Checks on tokenCache.redis that the schema can't express; problems go to `issues`. */
export function validateRedisTopology(doc: unknown, issues: IssueList): void {
  const cache = isObject(doc) ? doc.tokenCache : undefined;
  const redis = isObject(cache) ? cache.redis : undefined;
  if (!isObject(redis)) return;
  const given = FORMS.filter((form) => redis[form] !== undefined);
  if (given.length !== 1) {
    issues.add(
      AT,
      given.length === 0
        ? "expected one of url (one Redis), clusterNodes (Redis Cluster) or sentinel (Redis Sentinel), found none"
        : `expected only one of url, clusterNodes and sentinel, found ${given.join(" and ")}`,
    );
  }
  if (Array.isArray(redis.clusterNodes)) checkClusterNodes(redis.clusterNodes, issues);
  const sentinel = redis.sentinel;
  if (isObject(sentinel) && Array.isArray(sentinel.nodes)) {
    sentinel.nodes.forEach((node, i) => {
      if (typeof node !== "string") return;
      const port = parseHostPort(node).port;
      if (!(port >= 1 && port <= 65535)) {
        issues.add(
          [...AT, "sentinel", "nodes", i],
          `expected a port from 1 to 65535, found ${port}`,
        );
      }
    });
  }
}

/**
 * node-redis applies one set of credentials and one TLS setting (its `defaults`) to every node it
 * discovers, so the seed URLs must agree; a cluster has only database 0. URLs are described by
 * scheme and host only: their user info may hold a password.
 */
function checkClusterNodes(nodes: readonly unknown[], issues: IssueList): void {
  let first: { index: number; url: URL } | undefined;
  nodes.forEach((node, i) => {
    if (typeof node !== "string") return;
    const at = [...AT, "clusterNodes", i];
    let url: URL;
    try {
      url = new URL(node);
    } catch {
      issues.add(at, "expected a URL such as redis://redis-0.redis:6379, found an invalid URL");
      return;
    }
    if (url.hostname === "") {
      issues.add(at, "expected a URL with a host, such as redis://redis-0.redis:6379");
      return;
    }
    if (!/^\/?0?$/.test(url.pathname)) {
      issues.add(
        at,
        `expected no database number (a cluster has only database 0), found ${url.pathname}`,
      );
    }
    if (first === undefined) {
      first = { index: i, url };
      return;
    }
    if (url.protocol !== first.url.protocol) {
      issues.add(
        at,
        `expected ${first.url.protocol}// like clusterNodes[${first.index}] (one TLS setting applies to every node), found ${url.protocol}//`,
      );
    } else if (url.username !== first.url.username || url.password !== first.url.password) {
      issues.add(
        at,
        `expected the same user and password as clusterNodes[${first.index}] (one set applies to every node), found others`,
      );
    }
  });
}
