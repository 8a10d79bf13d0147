/**
 * The human form of /status: one self-contained HTML page (inline CSS, no scripts, no external
 * assets) that reloads itself every few seconds. Served with a CSP that forbids everything but
 * inline styles, and every value is HTML-escaped, so a hostile upstream name or IdP error
 * description cannot run anything in an operator's browser.
 */
import type { StatusReport, UpstreamReport } from "./status-report.js";

/** Seconds between automatic reloads of the page. */
export const STATUS_PAGE_REFRESH_SECONDS = 5;

/** Content-Security-Policy sent with the page. */
export const STATUS_PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'";

const BADGE_COLOURS: Readonly<Record<string, string>> = {
  valid: "#1a7f37",
  running: "#1a7f37",
  ready: "#1a7f37",
  degraded: "#9a6700",
  draining: "#9a6700",
  fetching: "#0969da",
  starting: "#0969da",
  idle: "#57606a",
  failed: "#cf222e",
  "not ready": "#cf222e",
  closed: "#57606a",
  stopped: "#57606a",
  up: "#1a7f37",
  connecting: "#0969da",
  down: "#cf222e",
};

const STYLE = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;background:#f6f8fa;color:#1f2328}
header{background:#24292f;color:#fff;padding:12px 24px;display:flex;gap:16px;align-items:center;flex-wrap:wrap}
header h1{font-size:18px;margin:0 8px 0 0}
header .meta{color:#d0d7de}
main{padding:16px 24px;display:grid;gap:16px;grid-template-columns:repeat(auto-fill,minmax(420px,1fr))}
section{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:12px 16px}
section h2{font-size:16px;margin:0 0 8px;display:flex;gap:8px;align-items:center}
table{border-collapse:collapse;width:100%}
th{text-align:left;font-weight:600;color:#57606a;padding:3px 12px 3px 0;width:38%;vertical-align:top}
td{padding:3px 0;overflow-wrap:anywhere;font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:13px}
.badge{display:inline-block;border-radius:10px;padding:1px 9px;color:#fff;font-size:12px;font-weight:600;font-family:system-ui,sans-serif}
.error{color:#cf222e}
.empty{padding:24px;color:#57606a}
footer{padding:0 24px 16px;color:#57606a;font-size:12px}
`;

/** Render the status report as a complete HTML document. */
export function renderStatusPage(report: StatusReport): string {
  const sections = report.upstreams.map(renderUpstream).join("\n");
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="refresh" content="${STATUS_PAGE_REFRESH_SECONDS}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>bearer-proxy status</title>
<style>${STYLE}</style>
</head>
<body>
<header>
<h1>bearer-proxy</h1>
<span class="meta">version ${escapeHtml(report.version)}</span>
<span class="meta">phase ${badge(report.phase)}</span>
<span class="meta">${badge(report.ready ? "ready" : "not ready")}</span>
<span class="meta">up ${escapeHtml(formatSeconds(report.uptimeSeconds))}</span>
${report.sharedTokenCache ? `<span class="meta">redis token cache ${badge(report.sharedTokenCache.state)}</span>\n` : ""}</header>
<main>
${sections || '<p class="empty">No upstreams configured.</p>'}
</main>
<footer>Generated ${escapeHtml(report.generatedAt)}; reloads every ${STATUS_PAGE_REFRESH_SECONDS} s. Tokens are shown only as fingerprints (first 8 hex of SHA-256). JSON: <code>curl /status</code>.</footer>
</body>
</html>
`;
}

function renderUpstream(u: UpstreamReport): string {
  const t = u.token;
  const r = u.requests;
  const classes = Object.entries(r.byStatusClass)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([cls, n]) => `${cls}: ${n}`)
    .join(", ");
  const errorCodes = Object.entries(r.errorsByCode)
    .map(([code, n]) => `${code}: ${n}`)
    .join(", ");
  const rows: [string, string][] = [
    ["Base URL", escapeHtml(u.baseUrl)],
    ["API version", escapeHtml(u.apiVersion)],
    ["Token endpoint", escapeHtml(u.tokenUrl)],
    ["Token state", badge(t.state)],
    ["Fingerprint", text(t.fingerprint)],
    ["Scope", text(t.scope)],
    [
      "Expires",
      t.expiresAt === null
        ? "—"
        : `${escapeHtml(t.expiresAt)} (${escapeHtml(formatSecondsToExpiry(t.secondsToExpiry))})`,
    ],
    [
      "Last fetch",
      t.lastFetchAt === null
        ? "—"
        : `${escapeHtml(t.lastFetchAt)}${t.lastFetchDurationMs === null ? "" : ` in ${t.lastFetchDurationMs} ms`}`,
    ],
    ["Next refresh", text(t.nextRefreshAt)],
    ["Fetches / failures", `${t.fetchCount} / ${t.failureCount}`],
    [
      "Last error",
      t.lastError === null
        ? "—"
        : `<span class="error">${escapeHtml(t.lastError.code)}: ${escapeHtml(t.lastError.message)}</span> at ${escapeHtml(t.lastError.at)}`,
    ],
    [
      "Requests",
      `${r.total} total${classes ? ` (${escapeHtml(classes)})` : ""}, ${r.inFlight} in flight`,
    ],
    ["Proxy errors", `${r.errors}${errorCodes ? ` (${escapeHtml(errorCodes)})` : ""}`],
    ["401 replays", String(r.replays)],
    ["Token mode", u.prefetch ? "prefetch" : "lazy (fetched on first request)"],
  ];
  const body = rows.map(([k, v]) => `<tr><th>${k}</th><td>${v}</td></tr>`).join("\n");
  return `<section data-upstream="${escapeHtml(u.name)}">
<h2>${escapeHtml(u.name)} ${badge(t.state)}</h2>
<table>
${body}
</table>
</section>`;
}

function badge(label: string): string {
  const colour = BADGE_COLOURS[label] ?? "#57606a";
  return `<span class="badge" style="background:${colour}">${escapeHtml(label)}</span>`;
}

function text(value: string | null): string {
  return value === null ? "—" : escapeHtml(value);
}

/** Escape the five characters that matter in HTML text and attribute values. */
export function escapeHtml(value: string): string {
  return value
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;")
    .replaceAll("'", "&#39;");
}

function formatSecondsToExpiry(seconds: number | null): string {
  if (seconds === null) return "—";
  return seconds >= 0 ? `in ${formatSeconds(seconds)}` : `expired ${formatSeconds(-seconds)} ago`;
}

function formatSeconds(total: number): string {
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  if (h > 0) return `${h}h ${m}m ${s}s`;
  if (m > 0) return `${m}m ${s}s`;
  return `${s}s`;
}
