/**
 * CONNECT interception on /status: the CA clients must trust (subject, SHA-256 fingerprint,
 * validity, key type; never the key) and the upstreams whose CONNECT is terminated, with the
 * authority that routes to each. Present only when `intercept` is configured.
 */

import { interceptAuthority } from "../base/authority.js";
import type { CaSummary } from "../config/intercept-ca.js";
import type { UpstreamConfig } from "../config/proxy-config.js";
import { escapeHtml } from "./html.js";

export interface InterceptStatus {
  /** The CA as loaded at start; null until it is (the start refuses one that cannot load). */
  ca: {
    subject: string;
    fingerprintSha256: string;
    notBefore: string;
    expiresAt: string;
    secondsToExpiry: number;
    /** `RSA 2048`, `EC P-256`: the kind of key, never the key. */
    key: string;
    certFile: string;
  } | null;
  /** Upstreams with `intercept: true`, in config order. */
  upstreams: { name: string; authority: string }[];
}

/** The section's data from the loaded CA and the running configuration's upstreams. */
export function interceptStatus(
  ca: CaSummary | undefined,
  upstreams: readonly UpstreamConfig[],
  nowWallMs: number,
): InterceptStatus {
  return {
    ca: ca
      ? {
          subject: ca.subject,
          fingerprintSha256: ca.fingerprintSha256,
          notBefore: ca.notBefore.toISOString(),
          expiresAt: ca.notAfter.toISOString(),
          secondsToExpiry: Math.floor((ca.notAfter.getTime() - nowWallMs) / 1000),
          key: ca.key,
          certFile: ca.certFile,
        }
      : null,
    upstreams: upstreams
      .filter((u) => u.intercept)
      .map((u) => ({ name: u.name, authority: interceptAuthority(u.baseUrl) ?? "" })),
  };
}

/** The section of the status page (every value escaped). */
export function renderInterceptSection(status: InterceptStatus): string {
  const ca = status.ca;
  const rows: [string, string][] = ca
    ? [
        ["CA", escapeHtml(ca.subject)],
        ["SHA-256", `<code>${escapeHtml(ca.fingerprintSha256)}</code>`],
        ["Expires", `${escapeHtml(ca.expiresAt)} (${escapeHtml(formatDays(ca.secondsToExpiry))})`],
        ["Key", escapeHtml(ca.key)],
        ["Certificate file", escapeHtml(ca.certFile)],
      ]
    : [["CA", '<span class="muted">not loaded yet</span>']];
  const intercepted =
    status.upstreams.length === 0
      ? '<span class="muted">none (every CONNECT is refused)</span>'
      : status.upstreams
          .map(
            (u) => `${escapeHtml(u.name)} <span class="muted">(${escapeHtml(u.authority)})</span>`,
          )
          .join(", ");
  rows.push(["Intercepted", intercepted]);
  const table = rows.map(([k, v]) => `<tr><th>${k}</th><td>${v}</td></tr>`).join("\n");
  return `<section class="intercept" aria-label="CONNECT interception">
<h2>CONNECT interception</h2>
<table class="facts">
${table}
</table>
</section>`;
}

function formatDays(seconds: number): string {
  const days = Math.floor(Math.abs(seconds) / 86_400);
  const span = days >= 2 ? `${days} days` : `${Math.floor(Math.abs(seconds) / 3600)} h`;
  return seconds >= 0 ? `in ${span}` : `expired ${span} ago`;
}
