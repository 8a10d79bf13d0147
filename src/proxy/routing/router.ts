/**
 * Request → upstream selection, built once per listener from config. Rules, in order:
 * 1. the listener: an upstream with its own `listen` is served only there, the others on the
 *    main listener (see `groupUpstreamsByListener`);
 * 2. the authority (Host header, or the absolute-form URI's): if it is in some upstream's
 *    `match.hosts`, only those upstreams are candidates, otherwise only upstreams without hosts;
 * 3. the longest `match.pathPrefix` that matches the path as the guards normalized it
 *    (byte-wise, case-sensitive; nothing is decoded here — see net/path-normalization.ts); a
 *    prefix not ending in "/" matches on a segment boundary.
 * A lookup builds nothing per request: a listener with a few prefixes (a sidecar has one) tests
 * each, longest first; one with many probes a Map once per path segment.
 */
import type { ListenSpec, ProxyConfig, UpstreamConfig } from "../../config/proxy-config.js";

export interface Router {
  /** The upstream for this authority (lowercase or not; undefined for none) and pathname. */
  route(authority: string | undefined, pathname: string): UpstreamConfig | undefined;
  /** True if `authority` is named in some upstream's `match.hosts` on this listener. */
  isKnownHost(authority: string): boolean;
  /** A secret-free description of the configured routes, for 404 messages. */
  readonly routesDescription: string;
}

/** One listener and the upstreams it serves. */
export interface ListenerGroup {
  listen: ListenSpec;
  /** True for the main `listen` address. */
  main: boolean;
  upstreams: readonly UpstreamConfig[];
}

/**
 * Splits upstreams by listener: those with their own `listen` each get theirs (several upstreams
 * may share one), the rest stay on the main listener. The main group is always first, even when
 * empty (the main listener still answers, with 404).
 */
export function groupUpstreamsByListener(config: ProxyConfig): ListenerGroup[] {
  const main: ListenerGroup = { listen: config.listen, main: true, upstreams: [] };
  const groups = new Map<string, ListenerGroup>();
  const mainKey = `${config.listen.host}:${config.listen.port}`;
  groups.set(mainKey, main);
  for (const upstream of config.upstreams) {
    const listen = upstream.listen ?? config.listen;
    const key = `${listen.host}:${listen.port}`;
    let group = groups.get(key);
    if (!group) {
      group = { listen, main: false, upstreams: [] };
      groups.set(key, group);
    }
    (group.upstreams as UpstreamConfig[]).push(upstream);
  }
  return [...groups.values()];
}

/**
 * `host`, `host:port` → `host:port` lowercase; an authority without a port (or an empty one)
 * means port 80, the default of the `http` scheme our clients speak.
 */
export function normalizeAuthority(authority: string): string {
  const lower = authority.toLowerCase();
  const colon = lower.lastIndexOf(":");
  // A bracketed IPv6 literal contains colons; only a colon after "]" starts a port.
  if (colon === -1 || (lower.startsWith("[") && colon < lower.indexOf("]"))) return `${lower}:80`;
  if (colon === lower.length - 1) return `${lower}80`;
  return lower;
}

/** Prefix → upstream for one set of candidates. */
interface PrefixTable {
  readonly byPrefix: Map<string, UpstreamConfig>;
  /** The same, longest prefix first, when few enough to test each (else undefined). */
  readonly longestFirst: readonly { prefix: string; upstream: UpstreamConfig }[] | undefined;
}

/**
 * Up to this many prefixes are tested one by one; past it the Map walk is cheaper. The walk
 * slices and hashes the path once or twice per segment — for a sidecar's one "/" prefix, every
 * segment of a deep path.
 */
const SCAN_LIMIT = 8;

function buildPrefixTable(upstreams: readonly UpstreamConfig[], what: string): PrefixTable {
  const byPrefix = new Map<string, UpstreamConfig>();
  for (const upstream of upstreams) {
    const prefix = upstream.match.pathPrefix || "/";
    const other = byPrefix.get(prefix);
    if (other) {
      throw new Error(
        `upstreams ${other.name} and ${upstream.name} both match path prefix ${prefix} ${what}`,
      );
    }
    byPrefix.set(prefix, upstream);
  }
  const longestFirst =
    byPrefix.size <= SCAN_LIMIT
      ? [...byPrefix]
          .map(([prefix, upstream]) => ({ prefix, upstream }))
          .sort((a, b) => b.prefix.length - a.prefix.length)
      : undefined;
  return { byPrefix, longestFirst };
}

/**
 * `prefix` matches `pathname` as the Map walk below finds it: the whole of it, or a start of it
 * that ends with "/" (and is shorter), or one followed by "/" there (a segment boundary).
 */
function prefixMatches(prefix: string, pathname: string): boolean {
  if (!pathname.startsWith(prefix)) return false;
  if (prefix.length === pathname.length) return true;
  return prefix.endsWith("/") || pathname.charCodeAt(prefix.length) === 0x2f; /* / */
}

/**
 * Longest matching prefix: the whole pathname, then for each "/" from the right the prefix
 * ending with that slash and the one ending just before it (segment boundary).
 */
function lookupPrefix(
  { byPrefix: table, longestFirst }: PrefixTable,
  pathname: string,
): UpstreamConfig | undefined {
  if (longestFirst !== undefined) {
    for (let i = 0; i < longestFirst.length; i++) {
      const entry = longestFirst[i]!;
      if (prefixMatches(entry.prefix, pathname)) return entry.upstream;
    }
    return undefined;
  }
  const exact = table.get(pathname);
  if (exact) return exact;
  for (let i = pathname.lastIndexOf("/"); i >= 0; i = pathname.lastIndexOf("/", i - 1)) {
    if (i + 1 < pathname.length) {
      const withSlash = table.get(pathname.slice(0, i + 1));
      if (withSlash) return withSlash;
    }
    if (i > 0) {
      const beforeSlash = table.get(pathname.slice(0, i));
      if (beforeSlash) return beforeSlash;
    }
    if (i === 0) break;
  }
  return undefined;
}

/**
 * The path sent upstream: basePath + (stripPrefix ? path minus prefix : path), from the
 * normalized path the route matched, with nothing decoded or re-encoded on the way.
 */
export function upstreamPath(upstream: UpstreamConfig, pathAndQuery: string): string {
  let rest = pathAndQuery;
  const prefix = upstream.match.pathPrefix || "/";
  if (upstream.stripPrefix && prefix !== "/") {
    rest = pathAndQuery.slice(prefix.endsWith("/") ? prefix.length - 1 : prefix.length);
    if (rest === "" || rest.startsWith("?")) rest = `/${rest}`;
  }
  return upstream.basePath + rest;
}

/** Builds the router of one listener from the upstreams it serves. */
export function createRouter(upstreams: readonly UpstreamConfig[]): Router {
  const byHost = new Map<string, UpstreamConfig[]>();
  const anyHost: UpstreamConfig[] = [];
  for (const upstream of upstreams) {
    if (upstream.match.hosts.length === 0) {
      anyHost.push(upstream);
      continue;
    }
    for (const host of new Set(upstream.match.hosts.map(normalizeAuthority))) {
      let list = byHost.get(host);
      if (!list) {
        list = [];
        byHost.set(host, list);
      }
      list.push(upstream);
    }
  }
  const hostTables = new Map<string, PrefixTable>();
  for (const [host, list] of byHost) {
    hostTables.set(host, buildPrefixTable(list, `for host ${host}`));
  }
  const anyHostTable = buildPrefixTable(anyHost, "for any host");
  const routesDescription =
    upstreams
      .map((u) => {
        const hosts = u.match.hosts.length > 0 ? ` (hosts ${u.match.hosts.join(", ")})` : "";
        return `${u.match.pathPrefix || "/"}${hosts}`;
      })
      .join("; ") || "none";

  return {
    route(authority, pathname) {
      // Without match.hosts (a sidecar, most gateways) the authority need not be looked at.
      const table =
        authority === undefined || hostTables.size === 0
          ? undefined
          : hostTables.get(normalizeAuthority(authority));
      return lookupPrefix(table ?? anyHostTable, pathname);
    },
    isKnownHost(authority) {
      return hostTables.has(normalizeAuthority(authority));
    },
    routesDescription,
  };
}
