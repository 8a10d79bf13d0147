/**
 * The human form of /status, built for 10,000 upstreams: a summary first (counts by token
 * state, rates, a 15-minute chart, the worst upstreams), a search form, one page of upstreams
 * (problems first) and the detail of one (token timeline, sparklines). Rendered here, on the
 * server, from the same report as the JSON; the page's small script (status-assets/) only
 * fetches the part below the form again every 5 s and swaps it in, so what the operator typed
 * stays. Without the script every link and the form still work as plain navigation.
 *
 * Served under a CSP that allows only same-origin script, style and fetches; every value is
 * HTML-escaped, so a hostile upstream name or IdP error cannot run anything in the browser.
 */
import { createHash } from "node:crypto";
import { isPolicyRefusal } from "../errors.js";
import type { TokenMode } from "../token/token-registry.js";
import { escapeHtml } from "./html.js";
import { STATUS_PAGE_SCRIPT } from "./status-assets/page-script.js";
import { STATUS_PAGE_STYLE } from "./status-assets/page-style.js";
import {
  formatRate,
  renderRateChart,
  renderSparkline,
  renderTokenTimeline,
} from "./status-charts.js";
import { renderInterceptSection } from "./status-intercept.js";
import {
  allowCell,
  allowDetail,
  refusalCodes,
  renderRefusalSummary,
  renderUpstreamRefusals,
  routeLabel,
} from "./status-page-access.js";
import { TOKEN_STATES } from "./status-query.js";
import type { StatusReport, TokenReport, UpstreamDetail } from "./status-report.js";

export { escapeHtml } from "./html.js";

/** Seconds between in-place refreshes of the page's data. */
export const STATUS_PAGE_REFRESH_SECONDS = 5;

/**
 * The page's files, named by a hash of their content: browsers may cache them for good (a new
 * version has a new name), so a reload of the page is one request.
 */
export const STATUS_SCRIPT_PATH = `/status/assets/status-${contentHash(STATUS_PAGE_SCRIPT)}.js`;
export const STATUS_STYLE_PATH = `/status/assets/status-${contentHash(STATUS_PAGE_STYLE)}.css`;

/** Content-Security-Policy sent with the page: same-origin files only, nothing inline. */
export const STATUS_PAGE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const READINESS_REASONS: Readonly<Record<string, string>> = {
  config: "set in the config",
  "one-client": "default for one credential",
  "several-clients": "default for several credentials",
};

/** Requests waiting for a pacing turn, shown while some wait or once places were refused. */
function waitingMeta(waiting: StatusReport["waiting"]): string {
  if (waiting === undefined) return "";
  const refused = waiting.refused.maxWaiting + waiting.refused.maxWaitingPerCaller;
  if (waiting.requests === 0 && refused === 0) return "";
  const text = `waiting <b>${waiting.requests}</b> / ${waiting.maxWaiting}${refused > 0 ? `, ${refused} refused a place` : ""}`;
  return `<span class="meta">${text}</span>\n`;
}

/**
 * Render the whole document: header, search form, then the live part. `notice`: a line above
 * it (e.g. that the upstream a link named does not exist).
 */
export function renderStatusPage(
  report: StatusReport,
  detail?: UpstreamDetail,
  notice?: string,
): string {
  const p = report.page;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>bearer-proxy status</title>
<link rel="stylesheet" href="${STATUS_STYLE_PATH}">
<script src="${STATUS_SCRIPT_PATH}" defer></script>
</head>
<body data-refresh-seconds="${STATUS_PAGE_REFRESH_SECONDS}">
<header>
<h1>bearer-proxy</h1>
<span class="meta">version ${escapeHtml(report.version)}</span>
<span class="meta">phase ${badge(report.phase)}</span>
<span class="meta" id="ready-badge">${badge(report.ready ? "ready" : "not ready")}</span>
<span class="meta">readiness requires tokens: <b>${escapeHtml(report.readiness.requireTokens)}</b> (${escapeHtml(READINESS_REASONS[report.readiness.chosenBy] ?? report.readiness.chosenBy)})</span>
<span class="meta">up ${escapeHtml(formatSeconds(report.uptimeSeconds))}</span>
${report.sharedTokenCache ? `<span class="meta">redis token cache ${badge(report.sharedTokenCache.state)}</span>\n` : ""}${waitingMeta(report.waiting)}${renderCallersMeta(report.callers)}</header>
<form id="filters" method="get" action="/status" role="search">
<input type="hidden" name="upstream" value="${escapeHtml(detail?.name ?? "")}">
<label>Search <input type="search" name="q" value="${escapeHtml(p.q)}" placeholder="name or base URL" autocomplete="off" spellcheck="false"></label>
<label>State <select name="state">${options(
    [
      ["", "any"],
      ["failing", "failing (failed or degraded)"],
      ...TOKEN_STATES.map((s): [string, string] => [s, s]),
    ],
    p.state,
  )}</select></label>
<label>Mode <select name="mode">${options(
    [
      ["", "any"],
      ["prefetch", "prefetch"],
      ["lazy", "lazy"],
    ],
    p.mode,
  )}</select></label>
<label>Order <select name="sort">${options(
    [
      ["problems", "problems first"],
      ["config", "config order"],
      ["name", "name"],
    ],
    p.sort,
  )}</select></label>
<button type="submit">Apply</button>
<span id="refresh-state" class="muted" aria-live="polite"></span>
</form>
${
  notice === undefined
    ? ""
    : `<p class="notice error" role="alert">${escapeHtml(notice)}</p>
`
}<div id="live">
${renderStatusFragment(report, detail)}
</div>
<footer>Times are UTC. Tokens are shown only as fingerprints (first 8 hex of SHA-256). The data refreshes every ${STATUS_PAGE_REFRESH_SECONDS} s. JSON: <code>curl /status</code> (same filters: <code>?state=failing&amp;q=…&amp;limit=…&amp;offset=…</code>).</footer>
</body>
</html>
`;
}

/** The live part: summary, the page of upstreams and the selected upstream's detail. */
export function renderStatusFragment(report: StatusReport, detail?: UpstreamDetail): string {
  const link = linker(report, detail?.name ?? "");
  return `<div id="fragment" data-generated-at="${escapeHtml(report.generatedAt)}" data-ready="${report.ready}">
${renderSummary(report, link)}
${report.intercept ? renderInterceptSection(report.intercept) : ""}
<div class="columns${detail ? " with-detail" : ""}">
${renderList(report, link, detail?.name)}
${detail ? renderDetail(detail, link, report) : ""}
</div>
</div>`;
}

function renderSummary(report: StatusReport, link: Link): string {
  const s = report.summary;
  const stateLinks = TOKEN_STATES.map(
    (state) =>
      `<a class="count" data-nav href="${escapeHtml(link({ state, offset: 0 }))}">${badge(state)} <b data-count="${state}">${s.byState[state]}</b></a>`,
  ).join(" ");
  const problems =
    s.problems.length === 0
      ? '<p class="muted">No problems: every token usable or lazily waiting, no recent errors.</p>'
      : `<ol class="problems">${s.problems
          .map(
            (pr) =>
              `<li><a data-nav href="${escapeHtml(link({ upstream: pr.name }))}">${escapeHtml(pr.name)}</a> ${badge(pr.state)}${pr.errorsPerSecond > 0 ? ` <span class="error">${formatRate(pr.errorsPerSecond)} errors/s</span>` : ""}${pr.lastError ? ` <span class="muted">${escapeHtml(pr.lastError.code)}: ${escapeHtml(truncate(pr.lastError.message, 120))}</span>` : ""}</li>`,
          )
          .join(
            "",
          )}</ol>${s.problemCount > s.problems.length ? `<p><a data-nav href="${escapeHtml(link({ state: "failing", sort: "problems", offset: 0 }))}">all ${s.problemCount} problems…</a></p>` : ""}`;
  return `<section class="summary" aria-label="Summary">
<div class="stats">
<div class="stat"><span class="label">Upstreams</span><b id="upstream-count">${s.upstreams}</b></div>
<div class="stat"><span class="label">Requests / s (1 min)</span><b>${formatRate(s.requests.requestsPerSecond)}</b><span class="muted">${s.requests.requests15m} in 15 min</span></div>
<div class="stat"><span class="label">Errors / s (1 min)</span><b class="${s.requests.errorsPerSecond > 0 ? "error" : ""}">${formatRate(s.requests.errorsPerSecond)}</b><span class="muted">${s.requests.errors15m} in 15 min</span></div>
<div class="stat"><span class="label">Token mode</span><b>${s.byMode.prefetch}</b><span class="muted">prefetch, ${s.byMode.lazy} lazy</span></div>
</div>
<div class="states">Token states: <a class="count" data-nav href="${escapeHtml(link({ state: "", offset: 0 }))}">all <b>${s.upstreams}</b></a> ${stateLinks}</div>
<div class="overview">
<figure><figcaption>All requests (blue) and errors (red), last 15 minutes</figcaption>${renderRateChart(s.series)}</figure>
<div class="side">
<div class="problem-list"><h2>Problems (${s.problemCount})</h2>${problems}</div>
${renderRefusalSummary(s.policyRefusals, report.callerDenials ?? [], (name) => link({ upstream: name }))}
</div>
</div>
</section>`;
}

function renderList(report: StatusReport, link: Link, selected: string | undefined): string {
  const p = report.page;
  const first = p.total === 0 ? 0 : p.offset + 1;
  const last = p.offset + p.returned;
  const rows = report.upstreams
    .map((u) => {
      const t = u.token;
      return `<tr data-upstream="${escapeHtml(u.name)}"${u.name === selected ? ' class="selected"' : ""}>
<td><a data-nav href="${escapeHtml(link({ upstream: u.name }))}">${escapeHtml(u.name)}</a></td>
<td>${badge(t.state)}</td>
<td>${u.prefetch ? "prefetch" : "lazy"}</td>
<td class="route">${escapeHtml(routeLabel(u.route))}</td>
<td>${escapeHtml(u.apiVersion)}</td>
<td class="allow wide">${allowCell(u.allow)}</td>
<td class="url wide">${escapeHtml(u.baseUrl)}</td>
<td>${escapeHtml(formatSecondsToExpiry(t.secondsToExpiry))}</td>
<td class="num">${formatRate(u.rates.requestsPerSecond)}</td>
<td class="num${u.rates.errorsPerSecond > 0 ? " error" : ""}">${formatRate(u.rates.errorsPerSecond)}</td>
<td class="num${u.requests.policyRefusals > 0 ? " refused" : ""}">${u.requests.policyRefusals}</td>
<td class="last-error">${t.lastError ? `<span class="error">${escapeHtml(t.lastError.code)}</span> ${escapeHtml(truncate(t.lastError.message, 80))}` : ""}</td>
</tr>`;
    })
    .join("\n");
  const prev =
    p.offset > 0
      ? `<a data-nav rel="prev" href="${escapeHtml(link({ offset: Math.max(0, p.offset - p.limit) }))}">← previous</a>`
      : '<span class="muted">← previous</span>';
  const next =
    last < p.total
      ? `<a data-nav rel="next" href="${escapeHtml(link({ offset: p.offset + p.limit }))}">next →</a>`
      : '<span class="muted">next →</span>';
  return `<section class="list" aria-label="Upstreams">
<h2 id="list-heading">Upstreams ${first}–${last} of <span id="match-count">${p.total}</span> matching${p.total < report.summary.upstreams ? ` (of ${report.summary.upstreams})` : ""}</h2>
${
  p.returned === 0
    ? '<p class="empty">No upstream matches.</p>'
    : `<table>
<thead><tr><th>Upstream</th><th>Token</th><th>Mode</th><th>Route</th><th>API version</th><th class="wide">Allow</th><th class="wide">Base URL</th><th>Expires</th><th class="num">Req/s</th><th class="num">Err/s</th><th class="num" title="requests answered by policy since start (allow, rateLimit)">Refused</th><th>Last error</th></tr></thead>
<tbody>
${rows}
</tbody>
</table>`
}
<nav class="pager">${prev} ${next}</nav>
</section>`;
}

function renderDetail(u: UpstreamDetail, link: Link, report: StatusReport): string {
  const t = u.token;
  const r = u.requests;
  const classes = Object.entries(r.byStatusClass)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([cls, n]) => `${cls}: ${n}`)
    .join(", ");
  // Policy refusals are counted among the proxy's answers but shown apart: they are no errors.
  const byCode = Object.entries(r.errorsByCode);
  const errorCodes = byCode
    .filter(([code]) => !isPolicyRefusal(code))
    .map(([code, n]) => `${code}: ${n}`)
    .join(", ");
  const refused = refusalCodes(
    Object.fromEntries(byCode.filter(([code]) => isPolicyRefusal(code))),
  );
  const shared = report.sharedTokenCache !== undefined || t.sharedCacheHits > 0;
  const rows: [string, string][] = [
    ["Base URL", escapeHtml(u.baseUrl)],
    ["API version", escapeHtml(u.apiVersion)],
    ["Route", escapeHtml(routeLabel(u.route))],
    ["Allow", allowDetail(u.allow)],
    ["Token endpoint", escapeHtml(u.tokenUrl)],
    ["Token mode", escapeHtml(modeLabel(u.tokenMode))],
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
    ["Token source", originLabel(t, u.tokenNotShared)],
    ["Token endpoint requests / failures", `${t.fetchCount} / ${t.failureCount}`],
    ...(shared
      ? [["Taken from the shared cache", String(t.sharedCacheHits)] as [string, string]]
      : []),
    [
      "Last token error",
      t.lastError === null
        ? "—"
        : `<span class="error">${escapeHtml(t.lastError.code)}: ${escapeHtml(t.lastError.message)}</span> at ${escapeHtml(t.lastError.at)}`,
    ],
    [
      "Requests",
      `${r.total} total${classes ? ` (${escapeHtml(classes)})` : ""}, ${r.inFlight} in flight`,
    ],
    [
      "Proxy errors",
      `${r.errors - r.policyRefusals}${errorCodes ? ` (${escapeHtml(errorCodes)})` : ""}`,
    ],
    [
      "Refused by policy",
      `<span class="${r.policyRefusals > 0 ? "refused" : ""}">${r.policyRefusals}</span>${refused ? ` (${refused})` : ""}`,
    ],
    ["401 replays", String(r.replays)],
  ];
  const table = rows.map(([k, v]) => `<tr><th>${k}</th><td>${v}</td></tr>`).join("\n");
  return `<section class="detail" data-upstream="${escapeHtml(u.name)}" aria-label="Upstream ${escapeHtml(u.name)}">
<h2>${escapeHtml(u.name)} ${badge(t.state)} <a class="close" data-nav href="${escapeHtml(link({ upstream: "" }))}" aria-label="Close the detail">×</a></h2>
<h3>Token timeline</h3>
${renderTokenTimeline(u.timeline)}
<h3>Last 15 minutes</h3>
<div class="sparks">
<div><span class="label">requests ${formatRate(u.rates.requestsPerSecond)}/s</span>${renderSparkline(u.series.requests, "requests", u.series.bucketSeconds)}</div>
<div><span class="label">errors ${formatRate(u.rates.errorsPerSecond)}/s</span>${renderSparkline(u.series.errors, "errors", u.series.bucketSeconds)}</div>
</div>
<table class="facts">
${table}
</table>
${renderUpstreamRefusals(u.name, report.callerDenials ?? [])}
</section>`;
}

/** Where the current token came from and when; why it is not shared, when it is not. */
function originLabel(t: TokenReport, notShared: string | undefined): string {
  const why =
    notShared === undefined
      ? ""
      : ` <span class="muted">(not shared: ${escapeHtml(notShared)})</span>`;
  const o = t.origin;
  if (o === null) return `—${why}`;
  if (o.source === "token-endpoint") {
    return `token endpoint, at ${escapeHtml(o.receivedAt)}${why}`;
  }
  return `shared Redis cache, read at ${escapeHtml(o.receivedAt)} (issued at ${escapeHtml(o.issuedAt)} to the replica that asked)`;
}

/** "prefetch" or "lazy", and what decided it, as the operator's config would say it. */
export function modeLabel(mode: TokenMode): string {
  if (mode.mode === "prefetch") {
    return mode.decidedBy === "eagerLimit"
      ? "prefetch (within tokenCache.eagerLimit)"
      : "prefetch (fetched at start)";
  }
  return mode.decidedBy === "eagerLimit"
    ? "lazy (beyond tokenCache.eagerLimit; fetched on first request)"
    : "lazy (fetched on first request)";
}

type LinkChanges = Partial<Record<"q" | "state" | "mode" | "sort" | "upstream", string>> & {
  offset?: number;
};
/** A link to /status keeping the current filters and selection, with `changes` applied. */
type Link = (changes: LinkChanges) => string;

function linker(report: StatusReport, selected: string): Link {
  const p = report.page;
  const current: Record<string, string> = {
    q: p.q,
    state: p.state,
    mode: p.mode,
    sort: p.sort === "problems" ? "" : p.sort,
    offset: p.offset === 0 ? "" : String(p.offset),
    upstream: selected,
  };
  return (changes) => {
    const merged = { ...current };
    for (const [key, value] of Object.entries(changes)) {
      merged[key] = key === "offset" ? (value === 0 ? "" : String(value)) : String(value);
    }
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(merged)) if (value !== "") params.set(key, value);
    const query = params.toString();
    return query === "" ? "/status" : `/status?${query}`;
  };
}

function options(choices: readonly [string, string][], selected: string): string {
  return choices
    .map(
      ([value, label]) =>
        `<option value="${escapeHtml(value)}"${value === selected ? " selected" : ""}>${escapeHtml(label)}</option>`,
    )
    .join("");
}

/** The callers room in the header: the users file (stale while refused), checks, blocks. */
function renderCallersMeta(callers: StatusReport["callers"]): string {
  if (!callers) return "";
  const parts: string[] = [];
  const file = callers.usersFile;
  if (file) {
    const why =
      file.stale && file.problem
        ? ` <span class="muted">${escapeHtml(truncate(file.problem, 120))}</span>`
        : "";
    parts.push(
      `<span class="meta" id="users-file">users file ${badge(file.stale ? "stale" : "loaded")} ${file.users} user${file.users === 1 ? "" : "s"}${why}</span>`,
    );
  }
  const checks = callers.passwordChecks;
  if (checks) {
    parts.push(
      `<span class="meta">password checks ${checks.running} running, ${checks.queued} waiting (at most ${checks.maxConcurrent} / ${checks.maxQueued})</span>`,
    );
  }
  if (callers.blockedAddresses > 0) {
    parts.push(`<span class="meta">blocked addresses <b>${callers.blockedAddresses}</b></span>`);
  }
  return parts.map((part) => `${part}\n`).join("");
}

function badge(label: string): string {
  return `<span class="badge b-${label.replace(/[^a-z]/g, "-")}">${escapeHtml(label)}</span>`;
}

function text(value: string | null): string {
  return value === null ? "—" : escapeHtml(value);
}

function truncate(value: string, max: number): string {
  return value.length > max ? `${value.slice(0, max)}…` : value;
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

function contentHash(text: string): string {
  return createHash("sha256").update(text).digest("hex").slice(0, 12);
}
