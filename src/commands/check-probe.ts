/**
 * `bearer-proxy check --probe-path`: the path a client would send to the proxy, probed at the
 * upstream(s) the proxy would route it to — with the path the proxy would send (basePath,
 * stripPrefix) — and skipped, with where it goes instead, at the others. Probing every upstream
 * with one path failed those whose routes do not take it (`/platform/v1/...` at `/scripts`).
 */
import type { ProxyConfig, UpstreamConfig } from "../config/proxy-config.js";
import { errorMessage } from "../errors.js";
import { createDispatcher } from "../net/dispatcher.js";
import { request } from "../net/undici-core.js";
import { createRouter, groupUpstreamsByListener, upstreamPath } from "../proxy/routing/router.js";
import type { Dpop } from "../token/dpop/index.js";
import { msSince, type Outcome } from "./check-network.js";

/** Where a probe path goes for one upstream: probe it there, or why not. */
export type ProbeRoute =
  | { routed: true; clientPath: string; upstreamPath: string }
  | { routed: false; clientPath: string; elsewhere: string | undefined };

/** "/x" for "x": a probe path is a path on the proxy. */
export function clientProbePath(probePath: string): string {
  return probePath.startsWith("/") ? probePath : `/${probePath}`;
}

/**
 * Whether the proxy would route `probePath` to `upstream`: on the upstream's listener, with one
 * of its `match.hosts` (or any host when it names none). `elsewhere` names the upstream that
 * takes the path instead, if any.
 */
export function probeRoute(
  config: ProxyConfig,
  upstream: UpstreamConfig,
  probePath: string,
): ProbeRoute {
  const clientPath = clientProbePath(probePath);
  const query = clientPath.indexOf("?");
  const pathname = query === -1 ? clientPath : clientPath.slice(0, query);
  const group = groupUpstreamsByListener(config).find((g) => g.upstreams.includes(upstream));
  const router = createRouter(group?.upstreams ?? [upstream]);
  const authorities = upstream.match.hosts.length > 0 ? upstream.match.hosts : [undefined];
  const routes = authorities.map((authority) => router.route(authority, pathname));
  if (routes.includes(upstream)) {
    return { routed: true, clientPath, upstreamPath: upstreamPath(upstream, clientPath) };
  }
  return { routed: false, clientPath, elsewhere: routes.find((u) => u !== undefined)?.name };
}

/** The skipped step's text for an upstream the path does not route to. */
export function notRoutedHere(route: Extract<ProbeRoute, { routed: false }>): string {
  return route.elsewhere === undefined
    ? `${route.clientPath} matches none of this upstream's routes`
    : `${route.clientPath} routes to upstream ${route.elsewhere}`;
}

/** GET the routed path with the token, as the proxy would send it. */
export async function probeApi(
  config: ProxyConfig,
  upstream: UpstreamConfig,
  route: Extract<ProbeRoute, { routed: true }>,
  token: string,
  dpop: Dpop | undefined,
): Promise<Outcome> {
  const dispatcher = createDispatcher({
    tls: upstream.tls,
    connections: 1,
    connectTimeoutMs: upstream.timeouts.connectMs,
    headersTimeoutMs: upstream.timeouts.responseHeadersMs,
    bodyTimeoutMs: upstream.timeouts.bodyIdleMs,
    idleConnectionMs: upstream.timeouts.idleConnectionMs,
    egressProxy: config.egressProxy,
  });
  const started = performance.now();
  const shown =
    route.upstreamPath === route.clientPath
      ? route.clientPath
      : `${route.clientPath} (sent as ${route.upstreamPath})`;
  try {
    const url = `${upstream.origin}${route.upstreamPath}`;
    const headers: Record<string, string> = {
      ...upstream.headers,
      authorization: dpop ? dpop.authorization(token) : `Bearer ${token}`,
    };
    if (upstream.versionHeader !== undefined) headers["x-version"] = upstream.versionHeader;
    let response: Awaited<ReturnType<typeof request>>;
    for (let attempt = 1; ; attempt++) {
      // A fresh proof per attempt; a resource server's use_dpop_nonce gets one retry (RFC 9449 §9).
      if (dpop) headers.dpop = dpop.proofFor("GET", url, token);
      response = await request(url, { method: "GET", headers, dispatcher });
      await response.body.dump().catch(() => {});
      if (!(dpop?.noteResponse(url, response.statusCode, response.headers) && attempt === 1)) break;
    }
    const status = response.statusCode;
    const detail = `GET ${shown} → ${status} in ${msSince(started)} ms`;
    if (status < 300) return { ok: true, detail };
    return { ok: false, detail, hint: apiHint(status, upstream) };
  } catch (error) {
    return {
      ok: false,
      detail: `GET ${shown} failed (${errorMessage(error)})`,
      hint: "see the DNS/TCP/TLS steps above",
    };
  } finally {
    await dispatcher.close().catch(() => {});
  }
}

function apiHint(status: number, upstream: UpstreamConfig): string {
  if (status === 401 && upstream.token.dpop) {
    return "the API rejected a fresh DPoP-bound token and its proof: check that it accepts DPoP (RFC 9449) with dpop.algorithm, and that the base URL and token endpoint are the same environment";
  }
  if (status === 401) {
    return "the API rejected a fresh token: check that the base URL and token endpoint are the same environment, and apiVersion";
  }
  if (status === 403) return "the token is valid but not allowed here: check the granted scope";
  if (status === 404) {
    return upstream.versionHeader === undefined
      ? "no such path: default-version paths start with a prefix such as /platform/v1/"
      : "no such path: check --probe-path (preview paths have no /platform/v1/ prefix)";
  }
  if (status < 400)
    return "the API redirects: use the final URL as baseUrl (redirects are never followed)";
  if (status >= 500) return "the API failed on its side";
  return "the API refused the request";
}
