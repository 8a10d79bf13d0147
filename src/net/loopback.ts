/**
 * Loopback detection: of a socket's own address (/quitquitquit takes that, never
 * X-Forwarded-For: only a process on the same host or pod may stop the proxy), and of a
 * configured listen host (the start-up warning about exposed credentials).
 */
import { isIPv4 } from "node:net";

/** True for 127.0.0.0/8, ::1 and IPv4-mapped 127.x (::ffff:127.x.y.z). */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  const lower = address.toLowerCase();
  if (lower === "::1" || lower === "0:0:0:0:0:0:0:1") return true;
  const v4 = lower.startsWith("::ffff:") ? lower.slice("::ffff:".length) : lower;
  return isIPv4(v4) && v4.startsWith("127.");
}

/** True for a listen host only this machine can reach: a loopback address, `[::1]`, `localhost`. */
export function isLoopbackHost(host: string): boolean {
  if (host.toLowerCase() === "localhost") return true;
  return isLoopbackAddress(host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host);
}
