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
import { isLoopbackAddress, isLoopbackHostHeader } from "../base/loopback.js";

export interface QuitRefusal {
  message: string;
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
  if (!isLoopbackHostHeader(headers.host)) {
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
