/**
 * The one rule for which CONNECT is terminated: its authority (RFC 9110 §9.3.6: `host:port`,
 * nothing else) equals an `intercept: true` upstream's baseUrl authority, the host compared
 * case-insensitively and 443 standing for a base URL that names no port. The config check
 * (one upstream per authority) and the CONNECT handler both ask here, so what validates is
 * what routes.
 */
import { isIP } from "node:net";

/** The port a client's `https://host/…` implies, and so the one its CONNECT names. */
const HTTPS_PORT = 443;

/**
 * `api.example.com:443` for `https://API.example.com/v1`; IPv6 hosts keep their brackets
 * (`[::1]:8443`). Undefined for something that is not an absolute URL.
 */
export function interceptAuthority(baseUrl: string): string | undefined {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    return undefined;
  }
  if (url.hostname === "") return undefined;
  // WHATWG URL already lowercases the host and drops the scheme's default port.
  return `${url.hostname}:${url.port === "" ? HTTPS_PORT : url.port}`;
}

/**
 * A CONNECT request-target as `interceptAuthority` writes it (lowercase host, port kept), or
 * undefined when it is not the authority-form `host:port` RFC 9110 §9.3.6 requires.
 */
export function connectAuthority(target: string): string | undefined {
  const match = /^(\[[0-9A-Fa-f:.]+\]|[^\s/?#@[\]:]+):([0-9]{1,5})$/.exec(target);
  if (!match) return undefined;
  const port = Number(match[2]);
  if (port < 1 || port > 65535) return undefined;
  // Through URL so the host reads exactly as a base URL's would (IDNA, IPv4 forms, IPv6 case).
  return interceptAuthority(`https://${match[1]}:${port}`);
}

/** The host of an authority, without port and IPv6 brackets: what the leaf certificate names. */
export function authorityHost(authority: string): string {
  const host = authority.slice(0, authority.lastIndexOf(":"));
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}

/** True when `host` (as `authorityHost` returns it) is an IP literal: its leaf names an IP SAN. */
export function isIpHost(host: string): boolean {
  return isIP(host) !== 0;
}

/** The intercepted upstreams of a configuration by their authority (the CONNECT route table). */
export function interceptRoutes<U extends { baseUrl: string; intercept: boolean }>(
  upstreams: readonly U[],
): ReadonlyMap<string, U> {
  const routes = new Map<string, U>();
  for (const upstream of upstreams) {
    if (!upstream.intercept) continue;
    const authority = interceptAuthority(upstream.baseUrl);
    // Validation refuses a second upstream for one authority; the first wins regardless.
    if (authority !== undefined && !routes.has(authority)) routes.set(authority, upstream);
  }
  return routes;
}
