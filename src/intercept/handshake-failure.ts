/**
 * Why a client's TLS handshake inside a terminated CONNECT failed, as a metric label and one log
 * line an operator can act on. A client that does not trust the interception CA (or pins the
 * real host's certificate) answers the leaf with a TLS alert (RFC 8446 §6.2): OpenSSL-based
 * clients (curl, Python, Node, git) send unknown_ca, Java certificate_unknown, Go
 * bad_certificate; the server side sees it as the error code node derives from the alert.
 */
import type { CaSummary } from "../config/intercept-ca.js";

/** The `reason` label of `bearer_proxy_intercept_handshake_failures_total`. */
export type HandshakeFailureReason = "untrusted_ca" | "expired" | "timeout" | "closed" | "other";

/** Alerts that mean "I do not accept this certificate" (RFC 8446 §6.2). */
const REFUSED_CERTIFICATE = new Set([
  "ERR_SSL_TLSV1_ALERT_UNKNOWN_CA",
  "ERR_SSL_SSLV3_ALERT_CERTIFICATE_UNKNOWN",
  "ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE",
  "ERR_SSL_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE",
  "ERR_SSL_TLSV1_ALERT_ACCESS_DENIED",
]);

/** The client's clock says the leaf is not valid (it runs more than the back-dating behind). */
const EXPIRED_CERTIFICATE = new Set(["ERR_SSL_SSLV3_ALERT_CERTIFICATE_EXPIRED"]);

const CLOSED = new Set(["ECONNRESET", "EPIPE", "ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE"]);

/** The label for a handshake error (`undefined`: the socket closed without one). */
export function handshakeFailureReason(error: unknown): HandshakeFailureReason {
  if (error === undefined) return "closed";
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return "other";
  if (REFUSED_CERTIFICATE.has(code)) return "untrusted_ca";
  if (EXPIRED_CERTIFICATE.has(code)) return "expired";
  if (code === "ETIMEDOUT" || code === "ERR_TLS_HANDSHAKE_TIMEOUT") return "timeout";
  if (CLOSED.has(code)) return "closed";
  return "other";
}

/** One log line for a failed handshake: the host, what happened, and what the client must trust. */
export function describeHandshakeFailure(
  reason: HandshakeFailureReason,
  host: string,
  ca: Pick<CaSummary, "subject" | "fingerprintSha256">,
): string {
  const trust = `the interception CA "${ca.subject}" (SHA-256 ${ca.fingerprintSha256}), which \`bearer-proxy intercept-ca\` prints`;
  switch (reason) {
    case "untrusted_ca":
      return `client refused the certificate for ${host}: it must trust ${trust} (a client that pins ${host}'s own certificate cannot be intercepted)`;
    case "expired":
      return `client refused the certificate for ${host} as expired or not yet valid: its clock is off by more than an hour`;
    case "timeout":
      return `client did not finish the TLS handshake for ${host} in time`;
    case "closed":
      return `client closed the connection for ${host} during the TLS handshake (a client that does not trust ${trust} may do this)`;
    default:
      return `TLS handshake for ${host} failed`;
  }
}
