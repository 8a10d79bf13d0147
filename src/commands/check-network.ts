/**
 * The network steps of `bearer-proxy check`, each the by-hand tool an operator would reach for:
 * DNS (dig), TCP connect (nc) and the TLS handshake (openssl s_client) with the same CA set and
 * hostname check the proxy uses. Each resolves with an outcome and never throws.
 */
import { lookup } from "node:dns/promises";
import { connect as connectTcp, isIP } from "node:net";
import {
  type ConnectionOptions,
  checkServerIdentity,
  connect as connectTls,
  type DetailedPeerCertificate,
} from "node:tls";
import type { UpstreamTls } from "../config/proxy-config.js";
import { errorMessage } from "../errors.js";
import { buildTlsOptions } from "../net/dispatcher.js";

/** What one step found; a failure may carry a plain-language hint. */
export type Outcome = { ok: true; detail: string } | { ok: false; detail: string; hint?: string };

const DAY_MS = 86_400_000;
/** Certificates closer than this to expiry pass with a warning. */
const EXPIRY_WARNING_DAYS = 14;

/** Resolve the host name (IP literals pass as they are). */
export async function checkDns(host: string): Promise<Outcome> {
  if (isIP(host)) return { ok: true, detail: `${host} is an IP address` };
  try {
    const addresses = await lookup(host, { all: true });
    return { ok: true, detail: `${host} → ${addresses.map((a) => a.address).join(", ")}` };
  } catch (error) {
    const code = errorCode(error);
    return {
      ok: false,
      detail: `${host} does not resolve (${code ?? errorMessage(error)})`,
      hint:
        code === "ENOTFOUND"
          ? "check the host name in the URL; inside a cluster, check the DNS name and namespace"
          : "the resolver did not answer: check this machine's DNS settings",
    };
  }
}

/** Open (and close) a TCP connection. */
export function checkTcp(host: string, port: number, timeoutMs: number): Promise<Outcome> {
  const started = performance.now();
  return new Promise((resolve) => {
    const socket = connectTcp({ host, port, timeout: timeoutMs });
    socket.once("connect", () => {
      const detail = `connected to ${socket.remoteAddress}:${port} in ${msSince(started)} ms`;
      socket.destroy();
      resolve({ ok: true, detail });
    });
    socket.once("timeout", () => {
      socket.destroy();
      resolve({
        ok: false,
        detail: `no answer from ${host}:${port} within ${timeoutMs} ms`,
        hint: "a firewall or network policy may drop the traffic, or an egress proxy is needed (egressProxy)",
      });
    });
    socket.once("error", (error) => {
      const code = errorCode(error);
      resolve({
        ok: false,
        detail: `cannot connect to ${host}:${port} (${code ?? errorMessage(error)})`,
        hint:
          code === "ECONNREFUSED"
            ? "nothing listens there: check the port in the URL and that the service is up"
            : "check the network path to this host",
      });
    });
  });
}

/**
 * TLS handshake with a verdict on trust, hostname and expiry. The probe verifies nothing by
 * itself (rejectUnauthorized: false) so it can still show the certificate when verification
 * fails; it sends no data, and the verdict applies the same CA set and hostname check as the proxy.
 */
export function checkTls(
  host: string,
  port: number,
  tls: UpstreamTls,
  timeoutMs: number,
): Promise<Outcome> {
  let options: ReturnType<typeof buildTlsOptions>;
  try {
    options = buildTlsOptions(tls, process.env.NODE_EXTRA_CA_CERTS);
  } catch (error) {
    return Promise.resolve({
      ok: false,
      detail: `cannot load the TLS files (${errorMessage(error)})`,
      hint: "check tls.caFile / certFile / keyFile: the paths must exist and be readable",
    });
  }
  const name = tls.serverName ?? host;
  return new Promise((resolve) => {
    const connectOptions: ConnectionOptions = {
      ...options,
      host,
      port,
      servername: isIP(name) ? undefined : name,
      rejectUnauthorized: false,
      timeout: timeoutMs,
    };
    const socket = connectTls(connectOptions);
    socket.once("secureConnect", () => {
      const cert = socket.getPeerCertificate(true);
      const verdict = tlsVerdict(name, cert, socket.authorizationError, socket.getProtocol());
      socket.destroy();
      resolve(verdict);
    });
    socket.once("timeout", () => {
      socket.destroy();
      resolve({
        ok: false,
        detail: `no TLS handshake within ${timeoutMs} ms`,
        hint: "is this port really HTTPS?",
      });
    });
    socket.once("error", (error) => {
      resolve({
        ok: false,
        detail: `TLS handshake failed (${errorMessage(error)})`,
        hint: /wrong version number|packet length too long/i.test(errorMessage(error))
          ? "the server does not speak TLS on this port: check the URL's scheme and port"
          : "check that the server supports TLS 1.2 or later",
      });
    });
  });
}

function tlsVerdict(
  name: string,
  cert: DetailedPeerCertificate,
  authorizationError: Error | string | undefined,
  protocol: string | null,
): Outcome {
  const subject = firstOf(cert.subject?.CN) ?? "(no CN)";
  const issuer = firstOf(cert.issuer?.CN) ?? firstOf(cert.issuer?.O) ?? "(unknown)";
  const notAfterMs = Date.parse(cert.valid_to);
  const daysLeft = Math.floor((notAfterMs - Date.now()) / DAY_MS);
  const san = cert.subjectaltname ?? "none";
  const identityError = checkServerIdentity(name, cert);
  const summary = `${protocol ?? "TLS"}, subject CN=${subject}, SAN ${san}, issuer CN=${issuer}, valid until ${new Date(notAfterMs).toISOString().slice(0, 10)} (${daysLeft} days left)`;
  const rawCode =
    typeof authorizationError === "string" ? authorizationError : errorCode(authorizationError);
  // With SNI set, Node folds the hostname check into authorizationError; report it as such.
  const code = rawCode === "ERR_TLS_CERT_ALTNAME_INVALID" ? undefined : rawCode;
  if (code === "CERT_HAS_EXPIRED") {
    return {
      ok: false,
      detail: `certificate expired: ${summary}`,
      hint: "the server's certificate has expired: it must be renewed on the server",
    };
  }
  if (code === "CERT_NOT_YET_VALID") {
    return {
      ok: false,
      detail: `certificate not yet valid: ${summary}`,
      hint: "check this machine's clock",
    };
  }
  if (code !== undefined) {
    return {
      ok: false,
      detail: `certificate not trusted (${code}): ${summary}`,
      hint: `it is signed by "${issuer}", a CA this machine does not trust: set tls.caFile to the CA that signed it`,
    };
  }
  if (identityError || rawCode === "ERR_TLS_CERT_ALTNAME_INVALID") {
    return {
      ok: false,
      detail: `certificate does not match ${name}: ${summary}`,
      hint: `the certificate is for ${san}: use one of those names in the URL, or set tls.serverName`,
    };
  }
  const warning = daysLeft < EXPIRY_WARNING_DAYS ? " — expires soon, renew it" : "";
  return { ok: true, detail: `${summary}, matches ${name}${warning}` };
}

function firstOf(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null | undefined)?.code;
  return typeof code === "string" ? code : undefined;
}

/** Whole milliseconds since `started` (a performance.now() reading). */
export function msSince(started: number): number {
  return Math.round(performance.now() - started);
}
