/**
 * The status page's pictures as inline SVG (no script, no external image): the gateway-wide rate
 * chart, per-upstream sparklines and the token timeline. Every number is computed here; the only
 * text is escaped labels, so the markup is as safe as the rest of the page.
 */
import { escapeHtml } from "./html.js";
import type { SeriesReport, TokenTimeline } from "./status-report.js";

/** Requests (blue area) and errors (red line) of the last 15 minutes, with axis labels. */
export function renderRateChart(series: SeriesReport, width = 640, height = 140): string {
  const pad = { left: 44, right: 8, top: 10, bottom: 22 };
  const w = width - pad.left - pad.right;
  const h = height - pad.top - pad.bottom;
  const max = niceMax(Math.max(1, ...series.requests));
  const x = (i: number) =>
    pad.left + (series.requests.length <= 1 ? 0 : (i * w) / (series.requests.length - 1));
  const y = (v: number) => pad.top + h - (v / max) * h;
  const requests = points(series.requests, x, y);
  const errors = points(series.errors, x, y);
  const area = `${pad.left},${pad.top + h} ${requests} ${x(series.requests.length - 1)},${pad.top + h}`;
  const minutes = (series.requests.length * series.bucketSeconds) / 60;
  const ticks = [0, 1 / 3, 2 / 3, 1]
    .map((f) => {
      const label = f === 1 ? "now" : `-${Math.round(minutes * (1 - f))} min`;
      const anchor = f === 0 ? "start" : f === 1 ? "end" : "middle";
      return `<text x="${fmt(pad.left + f * w)}" y="${height - 6}" text-anchor="${anchor}">${label}</text>`;
    })
    .join("");
  const perSecond = (n: number) => formatRate(n / series.bucketSeconds);
  const total = sum(series.requests);
  const totalErrors = sum(series.errors);
  const label = `Requests and errors over the last ${minutes} minutes: ${total} requests, ${totalErrors} errors; peak ${perSecond(Math.max(0, ...series.requests))}/s`;
  return `<svg class="chart" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${escapeHtml(label)}"><title>${escapeHtml(label)}</title>
<line class="axis" x1="${pad.left}" y1="${pad.top + h}" x2="${pad.left + w}" y2="${pad.top + h}"/>
<line class="grid" x1="${pad.left}" y1="${pad.top}" x2="${pad.left + w}" y2="${pad.top}"/>
<text x="${pad.left - 6}" y="${pad.top + 4}" text-anchor="end">${perSecond(max)}/s</text>
<text x="${pad.left - 6}" y="${pad.top + h}" text-anchor="end">0</text>
<polygon class="requests-area" points="${area}"/>
<polyline class="requests-line" points="${requests}"/>
<polyline class="errors-line" points="${errors}"/>
${ticks}</svg>`;
}

/** A small line of one series (requests or errors) scaled to its own peak. */
export function renderSparkline(
  values: readonly number[],
  kind: "requests" | "errors",
  bucketSeconds: number,
  width = 240,
  height = 36,
): string {
  const max = Math.max(1, ...values);
  const x = (i: number) => 1 + (values.length <= 1 ? 0 : (i * (width - 2)) / (values.length - 1));
  const y = (v: number) => height - 2 - (v / max) * (height - 4);
  const total = sum(values);
  const label = `${kind} over the last ${(values.length * bucketSeconds) / 60} minutes: ${total} in all, peak ${formatRate(Math.max(0, ...values) / bucketSeconds)}/s`;
  return `<svg class="spark ${kind}" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${escapeHtml(label)}"><title>${escapeHtml(label)}</title><polyline points="${points(values, x, y)}"/></svg>`;
}

/**
 * The token's life on one axis: requested → refresh window → expiry, the scheduled refresh and
 * "now". Without a token, a sentence instead of a picture.
 */
export function renderTokenTimeline(t: TokenTimeline, width = 640, height = 74): string {
  const issued = parse(t.issuedAt);
  const expires = parse(t.expiresAt);
  const now = parse(t.now) ?? 0;
  if (issued === undefined || expires === undefined || expires <= issued) {
    return `<p class="muted">No token: nothing to draw${t.nextRefreshAt ? `; next attempt ${escapeHtml(clock(parse(t.nextRefreshAt)))}` : ""}.</p>`;
  }
  const start = Math.min(issued, now);
  const end = Math.max(expires, now);
  const pad = 10;
  const w = width - 2 * pad;
  const x = (ms: number) => pad + ((ms - start) / (end - start)) * w;
  const barY = 22;
  const parts: string[] = [
    `<rect class="life" x="${fmt(x(issued))}" y="${barY}" width="${fmt(x(expires) - x(issued))}" height="12" rx="3"/>`,
  ];
  const from = parse(t.refreshWindowFrom);
  const to = parse(t.refreshWindowTo);
  if (from !== undefined && to !== undefined) {
    parts.push(
      `<rect class="window" x="${fmt(x(from))}" y="${barY}" width="${fmt(Math.max(1, x(to) - x(from)))}" height="12"><title>refresh window ${escapeHtml(clock(from))}–${escapeHtml(clock(to))}</title></rect>`,
    );
  }
  const next = parse(t.nextRefreshAt);
  if (next !== undefined && next >= start && next <= end) {
    parts.push(
      `<line class="next" x1="${fmt(x(next))}" y1="${barY - 4}" x2="${fmt(x(next))}" y2="${barY + 16}"><title>next refresh ${escapeHtml(clock(next))}</title></line>`,
    );
  }
  parts.push(
    `<line class="now" x1="${fmt(x(now))}" y1="6" x2="${fmt(x(now))}" y2="${barY + 18}"/>`,
    `<text class="now-label" x="${fmt(x(now))}" y="10" text-anchor="${x(now) > width - 60 ? "end" : "start"}" dx="${x(now) > width - 60 ? -4 : 4}">now</text>`,
    `<text x="${fmt(x(issued))}" y="${barY + 32}" text-anchor="start">fetched ${escapeHtml(clock(issued))}</text>`,
    `<text x="${fmt(x(expires))}" y="${barY + 32}" text-anchor="end">expires ${escapeHtml(clock(expires))}</text>`,
  );
  if (from !== undefined && to !== undefined) {
    parts.push(
      `<text class="window-label" x="${fmt((x(from) + x(to)) / 2)}" y="${barY + 46}" text-anchor="middle">refresh ${escapeHtml(clock(from))}–${escapeHtml(clock(to))}</text>`,
    );
  }
  const label = `Token fetched ${clock(issued)}, refresh window ${clock(from)}–${clock(to)}, expires ${clock(expires)}, now ${clock(now)}`;
  return `<svg class="timeline" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${escapeHtml(label)}"><title>${escapeHtml(label)}</title>${parts.join("")}</svg>`;
}

function points(values: readonly number[], x: (i: number) => number, y: (v: number) => number) {
  return values.map((v, i) => `${fmt(x(i))},${fmt(y(v))}`).join(" ");
}

function sum(values: readonly number[]): number {
  let total = 0;
  for (const v of values) total += v;
  return total;
}

/** 1, 2 or 5 times a power of ten at or above `value`, so the axis label is a round number. */
function niceMax(value: number): number {
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

export function formatRate(perSecond: number): string {
  if (perSecond === 0) return "0";
  if (perSecond >= 100) return String(Math.round(perSecond));
  if (perSecond >= 1) return perSecond.toFixed(1).replace(/\.0$/, "");
  return perSecond.toFixed(2);
}

function fmt(n: number): string {
  return String(Math.round(n * 10) / 10);
}

function parse(iso: string | null): number | undefined {
  if (iso === null) return undefined;
  const ms = Date.parse(iso);
  return Number.isFinite(ms) ? ms : undefined;
}

/** HH:MM:SS UTC: the page states UTC once, every time on it is UTC. */
function clock(ms: number | undefined): string {
  return ms === undefined ? "—" : new Date(ms).toISOString().slice(11, 19);
}
