/**
 * Who may use an upstream and who was refused, as the status page shows them: the route that
 * leads to it, its `allow` rules, and the requests answered by policy (`allow` refusals,
 * `rateLimit`). Refusals are the gateway doing what it was configured to do, so they are drawn
 * apart from errors and problems, in a neutral colour; only a refusal the gateway could not
 * decide (`keys_unavailable`: the cluster's keys could not be loaded) is marked as trouble.
 */
import type { Denial } from "../callers/denial-log.js";
import { escapeHtml } from "./html.js";
import type { RouteReport, StatusSummary } from "./status-report.js";

/** Refusals listed in the summary and in one upstream's detail (the JSON keeps the last 50). */
const SHOWN_REFUSALS = 10;

/** The status a refusal was answered with and what it means, by `Denial.reason`. */
const REFUSAL_REASONS: Readonly<Record<string, { status: number; text: string }>> = {
  no_credential: { status: 407, text: "no credential" },
  invalid_credential: { status: 407, text: "invalid credential" },
  not_allowed: { status: 403, text: "not allowed" },
  throttled: { status: 429, text: "throttled after failed attempts" },
  keys_unavailable: { status: 503, text: "keys unavailable (could not check)" },
};

/** The refusal the gateway could not decide: its own trouble, not policy. */
const NOT_POLICY = new Set(["keys_unavailable"]);

/** `api.example.com /v1/`, `any host /`, `listener 127.0.0.1:8081 any host /`. */
export function routeLabel(route: RouteReport): string {
  const listener = route.listen === null ? "" : `listener ${route.listen} `;
  const hosts = route.hosts.length === 0 ? "any host" : route.hosts.join(", ");
  return `${listener}${hosts} ${route.pathPrefix}${route.stripPrefix ? " (prefix stripped)" : ""}`;
}

/** An upstream's `allow` rules for a table cell; none: anyone who reaches the listener. */
export function allowCell(allow: readonly string[] | undefined): string {
  if (allow === undefined) {
    return '<span class="muted" title="no allow list: anyone who reaches the listener">anyone</span>';
  }
  return escapeHtml(allow.join(", "));
}

/** An upstream's `allow` rules for its detail. */
export function allowDetail(allow: readonly string[] | undefined): string {
  if (allow === undefined) {
    return '<span class="muted">anyone who reaches the listener (no allow list)</span>';
  }
  return allow.map((rule) => `<span class="rule">${escapeHtml(rule)}</span>`).join(" ");
}

/** Policy refusals by code, e.g. `caller_not_allowed 3 · rate_limited 2`; "" for none. */
export function refusalCodes(byCode: Readonly<Record<string, number>>): string {
  return Object.entries(byCode)
    .filter(([, n]) => n > 0)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([code, n]) => `${escapeHtml(code)} ${n}`)
    .join(" · ");
}

/**
 * The summary's block beside Problems: how many requests were answered by policy since start,
 * by code, and the latest refusals of callers (`keys_unavailable` is trouble and goes with the
 * errors, not here).
 */
export function renderRefusalSummary(
  refusals: StatusSummary["policyRefusals"],
  denials: readonly Denial[],
  upstreamHref: (name: string) => string,
): string {
  const recent = denials.filter((d) => !NOT_POLICY.has(d.reason)).slice(0, SHOWN_REFUSALS);
  const codes = refusalCodes(refusals.byCode);
  const body =
    refusals.total === 0 && recent.length === 0
      ? '<p class="muted">None since start.</p>'
      : `${codes ? `<p class="refusal-codes">${codes}</p>` : ""}${recent.length > 0 ? refusalTable(recent, upstreamHref) : ""}`;
  return `<div class="refusal-list" aria-label="Refused by policy">
<h2>Refused by policy (${refusals.total})</h2>
<p class="muted">Callers an upstream's <code>allow</code> list refused and requests its <code>rateLimit</code> paced: the gateway doing its job, not a problem.</p>
${body}
</div>`;
}

/** One upstream's latest refusals, for its detail; "" when it has none in the log. */
export function renderUpstreamRefusals(upstream: string, denials: readonly Denial[]): string {
  const mine = denials.filter((d) => d.upstream === upstream).slice(0, SHOWN_REFUSALS);
  if (mine.length === 0) return "";
  return `<h3>Recent refusals</h3>
${refusalTable(mine, undefined)}`;
}

function refusalTable(
  denials: readonly Denial[],
  upstreamHref: ((name: string) => string) | undefined,
): string {
  const rows = denials
    .map((d) => {
      const reason = REFUSAL_REASONS[d.reason];
      const trouble = NOT_POLICY.has(d.reason);
      const upstream = upstreamHref
        ? `<td><a data-nav href="${escapeHtml(upstreamHref(d.upstream))}">${escapeHtml(d.upstream)}</a></td>`
        : "";
      return `<tr class="${trouble ? "error" : "refused"}"><td>${escapeHtml(shortTime(d.at))}</td>${upstream}<td>${reason ? `${reason.status} ${escapeHtml(reason.text)}` : escapeHtml(d.reason)}</td><td>${escapeHtml(d.caller)}</td></tr>`;
    })
    .join("\n");
  return `<table class="refusals">
<thead><tr><th>Time</th>${upstreamHref ? "<th>Upstream</th>" : ""}<th>Answer</th><th>Caller</th></tr></thead>
<tbody>
${rows}
</tbody>
</table>`;
}

/** `2026-10-01 12:00:01` from an ISO time (UTC, as the page's footer says). */
function shortTime(iso: string): string {
  return iso.replace("T", " ").slice(0, 19);
}
