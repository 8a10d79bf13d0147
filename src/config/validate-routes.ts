/**
 * Checks across upstreams: unique names, listen addresses that would collide at bind time, and
 * routes two upstreams would both claim.
 *
 * Routing model (the proxy's router follows the same rules): an upstream with its own `listen`
 * is served only there; upstreams with identical `listen` addresses (host and port as written,
 * port 0 included) share one listener; the others share the main listener (src/proxy/router.ts
 * `groupUpstreamsByListener`). On one listener a request goes to
 * the upstream whose `match.hosts` contains its host (or which has no hosts) and whose
 * `match.pathPrefix` is the longest prefix of its path — the path as normalized by `paths`
 * (src/net/path-normalization.ts), so a prefix must be written in that form to ever match.
 */
import { MALFORMED_ESCAPE, normalizePath } from "../base/path-normalization.js";
import { formatPath, type IssueList, type IssuePath, isObject } from "./issues.js";
import { DEFAULTS, normalizeHostEntry } from "./normalize.js";
import type { ListenSpec, PathsConfig } from "./proxy-config.js";

interface Member {
  at: IssuePath;
  upstream: Record<string, unknown>;
}

const WILDCARD_HOSTS = new Set(["0.0.0.0", "::", "[::]", ""]);

/** Check names, listeners and routes of a (possibly schema-invalid) document. */
export function validateRoutes(doc: Record<string, unknown>, issues: IssueList): void {
  const main = listenOf(doc.listen, DEFAULTS.listen);
  const admin = listenOf(doc.admin, DEFAULTS.admin);
  if (main && admin && overlaps(main, admin)) {
    issues.add(
      ["admin"],
      `expected an address apart from listen (${show(main)}), found ${show(admin)}`,
    );
  }
  const upstreams = Array.isArray(doc.upstreams) ? doc.upstreams : [];
  checkNames(upstreams, doc, issues);
  const rules = pathRulesOf(doc.paths);
  if (rules) checkPrefixesNormalized(upstreams, rules, issues);

  const groups = new Map<string, { where: string; members: Member[] }>();
  const ownListeners: { at: IssuePath; spec: ListenSpec }[] = [];
  upstreams.forEach((upstream, i) => {
    if (!isObject(upstream)) return;
    const at: IssuePath = ["upstreams", i];
    let key = "main";
    let where = main ? `listen ${show(main)}` : "the main listener";
    if (upstream.listen !== undefined) {
      const spec = listenOf(upstream.listen, {
        host: DEFAULTS.upstream.listenHost,
        port: Number.NaN,
      });
      if (!spec || Number.isNaN(spec.port)) return; // malformed or portless: reported elsewhere
      checkOwnListener(spec, [...at, "listen"], { main, admin, others: ownListeners, doc }, issues);
      ownListeners.push({ at, spec });
      key = `${spec.host}:${spec.port}`;
      where = `listener ${show(spec)}`;
    }
    const group = groups.get(key) ?? { where, members: [] };
    group.members.push({ at, upstream });
    groups.set(key, group);
  });
  for (const group of groups.values()) checkAmbiguity(group.members, group.where, doc, issues);
}

function checkNames(upstreams: unknown[], doc: unknown, issues: IssueList): void {
  const firstIndex = new Map<string, number>();
  upstreams.forEach((upstream, i) => {
    const name = isObject(upstream) ? upstream.name : undefined;
    if (typeof name !== "string") return;
    const first = firstIndex.get(name);
    if (first === undefined) firstIndex.set(name, i);
    else {
      issues.add(
        ["upstreams", i, "name"],
        `expected a unique name, found "${name}" again (first used by ${formatPath(["upstreams", first], doc)})`,
      );
    }
  });
}

/** `paths` with its defaults, or undefined when malformed (the schema reports it). */
function pathRulesOf(value: unknown): PathsConfig | undefined {
  const paths = value ?? {};
  if (!isObject(paths)) return undefined;
  const mergeSlashes = paths.mergeSlashes ?? DEFAULTS.paths.mergeSlashes;
  const escapedSlashes = paths.escapedSlashes ?? DEFAULTS.paths.escapedSlashes;
  if (typeof mergeSlashes !== "boolean") return undefined;
  if (escapedSlashes !== "reject" && escapedSlashes !== "unescape" && escapedSlashes !== "keep") {
    return undefined;
  }
  return { mergeSlashes, escapedSlashes };
}

/**
 * Requests are routed by their normalized path: a prefix such as `/%61dmin/` or `/api//v1`
 * could never match one, so it is a mistake to report, not a route to keep silently.
 */
function checkPrefixesNormalized(
  upstreams: unknown[],
  rules: PathsConfig,
  issues: IssueList,
): void {
  upstreams.forEach((upstream, i) => {
    const match = isObject(upstream) ? upstream.match : undefined;
    const prefix = isObject(match) ? match.pathPrefix : undefined;
    if (typeof prefix !== "string" || !prefix.startsWith("/")) return;
    const normalized = normalizePath(prefix, rules);
    if (normalized === prefix) return;
    const at: IssuePath = ["upstreams", i, "match", "pathPrefix"];
    const found = JSON.stringify(prefix);
    if (normalized === MALFORMED_ESCAPE) {
      issues.add(at, `expected every % followed by two hex digits, found ${found}`);
    } else if (typeof normalized !== "string") {
      issues.add(
        at,
        `expected no encoded slash (%2F) while paths.escapedSlashes is reject (such requests are refused before routing), found ${found}`,
      );
    } else {
      issues.add(
        at,
        `expected the path as requests are routed, ${JSON.stringify(normalized)} (request paths are normalized first: see paths), found ${found}`,
      );
    }
  });
}

function checkOwnListener(
  spec: ListenSpec,
  at: IssuePath,
  others: {
    main: ListenSpec | undefined;
    admin: ListenSpec | undefined;
    others: readonly { at: IssuePath; spec: ListenSpec }[];
    doc: unknown;
  },
  issues: IssueList,
): void {
  for (const [name, other] of [
    ["listen", others.main],
    ["admin", others.admin],
  ] as const) {
    if (other && overlaps(spec, other)) {
      issues.add(
        at,
        `expected an address apart from ${name} (${show(other)}), found ${show(spec)}`,
      );
    }
  }
  for (const other of others.others) {
    const identical = spec.host === other.spec.host && spec.port === other.spec.port;
    if (!identical && overlaps(spec, other.spec)) {
      issues.add(
        at,
        `expected either the same address as ${formatPath(other.at, others.doc)}.listen (${show(other.spec)}) to share its listener, or another port, found ${show(spec)}`,
      );
      break; // one address is enough to act on
    }
  }
}

function checkAmbiguity(
  members: readonly Member[],
  where: string,
  doc: unknown,
  issues: IssueList,
): void {
  // Index (pathPrefix, host) -> first route claiming it, so 10,000 upstreams check in linear
  // time; "" stands for "any host" (no match.hosts), which only collides with itself.
  const claimed = new Map<string, number>();
  const routes = members.map((m) => ({ at: m.at, route: routeOf(m.upstream) }));
  routes.forEach((rb, b) => {
    if (!rb.route) return;
    const hosts = rb.route.hosts.length === 0 ? [""] : rb.route.hosts;
    let clash: { a: number; hosts: string[] } | undefined;
    for (const host of hosts) {
      const key = `${rb.route.pathPrefix}\0${host}`;
      const a = claimed.get(key);
      if (a === undefined) claimed.set(key, b);
      else if (!clash || a < clash.a) clash = { a, hosts: [host] };
      else if (a === clash.a) clash.hosts.push(host);
    }
    if (!clash) return;
    const ra = routes[clash.a]!;
    const shared =
      clash.hosts[0] === ""
        ? "any host"
        : `host${clash.hosts.length === 1 ? "" : "s"} ${clash.hosts.map((h) => JSON.stringify(h)).join(", ")}`;
    issues.add(
      [...rb.at, "match"],
      `routes the same requests as ${formatPath(ra.at, doc)} on ${where} (pathPrefix ${JSON.stringify(rb.route.pathPrefix)}, ${shared}); give one of them another match.pathPrefix or match.hosts`,
    );
  });
}

function routeOf(
  upstream: Record<string, unknown>,
): { pathPrefix: string; hosts: string[] } | undefined {
  const match = upstream.match ?? {};
  if (!isObject(match)) return undefined;
  const pathPrefix = match.pathPrefix ?? DEFAULTS.upstream.match.pathPrefix;
  const hosts = match.hosts ?? [];
  if (typeof pathPrefix !== "string" || !Array.isArray(hosts)) return undefined;
  if (!hosts.every((h) => typeof h === "string")) return undefined;
  return { pathPrefix, hosts: [...new Set(hosts.map(normalizeHostEntry))] };
}

/** A listen block with defaults filled in, or undefined when its fields have the wrong types. */
function listenOf(value: unknown, fallback: ListenSpec): ListenSpec | undefined {
  if (value === undefined) return fallback;
  if (!isObject(value)) return undefined;
  const host = value.host ?? fallback.host;
  const port = value.port ?? fallback.port;
  if (typeof host !== "string" || typeof port !== "number") return undefined;
  return { host, port };
}

/** Whether binding both would fail: same port (not 0) on the same or a wildcard interface. */
function overlaps(a: ListenSpec, b: ListenSpec): boolean {
  if (a.port !== b.port || a.port === 0) return false;
  const ha = a.host.toLowerCase();
  const hb = b.host.toLowerCase();
  return ha === hb || WILDCARD_HOSTS.has(ha) || WILDCARD_HOSTS.has(hb);
}

function show(spec: ListenSpec): string {
  return spec.host.includes(":") && !spec.host.startsWith("[")
    ? `[${spec.host}]:${spec.port}`
    : `${spec.host}:${spec.port}`;
}
