/**
 * Who may POST /quitquitquit. A loopback peer address alone is not enough on a laptop (the
 * legacy-tools mode): any web page the developer opens can make the browser send a POST to
 * 127.0.0.1. So, besides the loopback peer:
 * - no `Origin` header: browsers send one on every cross-origin POST (forms and fetch alike),
 *   command-line clients and Kubernetes never do;
 * - a loopback `Host` (localhost, 127.x, [::1]): a DNS-rebinding page reaches 127.0.0.1 under
 *   its own host name;
 * - a request no HTML form can send (`Content-Type: application/json` or an `X-Requested-With`
 *   header): fetch would need a CORS preflight for it, which this endpoint never grants.
 * Envoy's admin and Istio's pilot-agent guard the same endpoint the same ways.
 */
import type { IncomingHttpHeaders } from "node:http";
import { isIP } from "node:net";
import { isLoopbackAddress } from "../net/loopback.js";

export interface QuitRefusal {
  message: string;
}

/** `host[:port]` or `[v6]:port` → the host part, lowercased. */
function hostnameOf(host: string): string {
  const trimmed = host.trim().toLowerCase();
  if (trimmed.startsWith("[")) return trimmed.slice(1, trimmed.indexOf("]"));
  const colon = trimmed.lastIndexOf(":");
  return colon === -1 ? trimmed : trimmed.slice(0, colon);
}

/** localhost, *.localhost (RFC 6761 §6.3), or a loopback IP literal. */
export function isLoopbackHost(host: string | undefined): boolean {
  if (host === undefined) return false;
  const name = hostnameOf(host);
  if (name === "localhost" || name.endsWith(".localhost")) return true;
  return isIP(name) !== 0 && isLoopbackAddress(name);
}

function isNonSimple(headers: IncomingHttpHeaders): boolean {
  const type = headers["content-type"]?.split(";")[0]?.trim().toLowerCase();
  return type === "application/json" || headers["x-requested-with"] !== undefined;
}

/** Why a /quitquitquit request is refused, or undefined when it may stop the proxy. */
export function quitRefusal(
  remoteAddress: string | undefined,
  headers: IncomingHttpHeaders,
): QuitRefusal | undefined {
  if (!isLoopbackAddress(remoteAddress)) {
    return { message: "/quitquitquit is accepted only from loopback" };
  }
  if (headers.origin !== undefined) {
    return { message: "/quitquitquit is not accepted from a web page (the request has an Origin)" };
  }
  if (!isLoopbackHost(headers.host)) {
    return {
      message: "/quitquitquit is accepted only with a loopback Host (localhost, 127.0.0.1)",
    };
  }
  if (!isNonSimple(headers)) {
    return {
      message:
        "/quitquitquit needs Content-Type: application/json or an X-Requested-With header (a plain form POST can't stop the proxy)",
    };
  }
  return undefined;
}
