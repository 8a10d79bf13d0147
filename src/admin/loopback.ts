/**
 * Loopback detection for /quitquitquit. Uses the socket's own address, never X-Forwarded-For:
 * only a process on the same host (or in the same pod network namespace) may stop the proxy.
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
