/**
 * Loopback, by the three rules the house needs, each named for what it reads:
 * - a socket's own peer address (`isLoopbackAddress`): /quitquitquit takes that, never
 *   X-Forwarded-For: only a process on the same host or pod may stop the proxy;
 * - a configured listen host (`isLoopbackListenHost`): the start-up warning about exposed
 *   credentials; a bare host as the config writes it, no port;
 * - a request's `Host` header (`isLoopbackHostHeader`): /quitquitquit's DNS-rebinding guard; a
 *   port may follow, and any `*.localhost` name counts (RFC 6761 §6.3).
 */
import { isIP, isIPv4 } from "node:net";

/** True for 127.0.0.0/8, ::1 and IPv4-mapped 127.x (::ffff:127.x.y.z). */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  const lower = address.toLowerCase();
  if (lower === "::1" || lower === "0:0:0:0:0:0:0:1") return true;
  const v4 = lower.startsWith("::ffff:") ? lower.slice("::ffff:".length) : lower;
  return isIPv4(v4) && v4.startsWith("127.");
}

/** True for a listen host only this machine can reach: a loopback address, `[::1]`, `localhost`. */
export function isLoopbackListenHost(host: string): boolean {
  if (host.toLowerCase() === "localhost") return true;
  return isLoopbackAddress(host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host);
}

/** A `Host` header naming this machine: localhost, *.localhost, or a loopback IP literal. */
export function isLoopbackHostHeader(host: string | undefined): boolean {
  if (host === undefined) return false;
  const name = hostnameOf(host);
  if (name === "localhost" || name.endsWith(".localhost")) return true;
  return isIP(name) !== 0 && isLoopbackAddress(name);
}

/** `host[:port]` or `[v6]:port` → the host part, lowercased. */
function hostnameOf(host: string): string {
  const trimmed = host.trim().toLowerCase();
  if (trimmed.startsWith("[")) return trimmed.slice(1, trimmed.indexOf("]"));
  const colon = trimmed.lastIndexOf(":");
  return colon === -1 ? trimmed : trimmed.slice(0, colon);
}
