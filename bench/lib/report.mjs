/**
 * Render a run as Markdown: one table per throughput case, the fixed-rate latency table, the
 * HTTP/2 and feature-cost comparisons with bearer-proxy itself, the token-side section, the
 * targets check, and how the run was made.
 */
import { spansMarkdown } from "./variant-tracing.mjs";
import { PLAIN, VARIANT_CASE, variantCompetitorKey } from "./variants.mjs";

const LABELS = {
  "bearer-proxy": "bearer-proxy",
  "bearer-proxy-h2": "bearer-proxy, http2",
  nginx: "nginx",
  undici: "undici forwarder",
  fastify: "fastify-http-proxy",
  direct: "direct (ceiling)",
};

function num(value, digits = 0) {
  if (typeof value !== "number" || !Number.isFinite(value)) return "—";
  return value.toLocaleString("en-US", {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
}

function withRange(s, digits = 0) {
  if (s.median === null) return "—";
  if (s.min === s.max) return num(s.median, digits);
  return `${num(s.median, digits)} (${num(s.min, digits)}–${num(s.max, digits)})`;
}

function ratio(s) {
  if (s.median === null) return "—";
  if (s.min === s.max) return `${num(s.median, 2)}×`;
  return `${num(s.median, 2)}× (${num(s.min, 2)}–${num(s.max, 2)})`;
}

function throughputTable(caseSummary, order) {
  const rows = [
    "| competitor | req/s median (min–max) | ×nginx | ×undici | p50 ms | p99 ms | CPU s/10k | peak RSS MiB | req per CPU-s |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const key of order) {
    const s = caseSummary[key];
    if (!s) continue;
    const cpu = s.cpuSecondsPer10k.median;
    rows.push(
      `| ${LABELS[key] ?? key} | ${withRange(s.rps)} | ${key === "nginx" ? "1.00×" : ratio(s.rpsVsNginx)} | ` +
        `${key === "undici" ? "1.00×" : ratio(s.rpsVsUndici)} | ${num(s.p50Ms.median, 2)} | ${num(s.p99Ms.median, 2)} | ` +
        `${num(cpu, 3)} | ${num(s.peakRssMiB.max, 1)} | ${cpu ? num(10_000 / cpu) : "—"} |`,
    );
  }
  return rows.join("\n");
}

function latencyTable(caseSummary, order) {
  const rows = [
    "| competitor | achieved req/s | p50 ms | p99 ms | typical-second p99 ms | p50 added ms | p99 added ms | typical-second p99 added ms | CPU s/10k | peak RSS MiB |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const key of order) {
    const s = caseSummary[key];
    if (!s) continue;
    const added = (d) => (key === "direct" ? "0" : withRange(d, 3));
    rows.push(
      `| ${LABELS[key] ?? key} | ${num(s.rps.median)} | ${withRange(s.p50Ms, 3)} | ${withRange(s.p99Ms, 3)} | ` +
        `${withRange(s.typicalSecondP99Ms, 3)} | ${added(s.addedP50Ms)} | ${added(s.addedP99Ms)} | ` +
        `${added(s.addedTypicalSecondP99Ms)} | ${num(s.cpuSecondsPer10k.median, 3)} | ${num(s.peakRssMiB.max, 1)} |`,
    );
  }
  return rows.join("\n");
}

/** bearer-proxy with `http2: true` against itself over HTTP/1.1, case by case. */
function http2Table(summary, cases) {
  const rows = [
    "| case | HTTP/1.1 req/s | HTTP/2 req/s | req/s ×h1 | CPU s/10k h1 | CPU s/10k h2 | per CPU-s ×h1 | p99 ms h1 / h2 | upstream connections used per cell h1 / h2 | TLS handshakes to the upstream per cell h1 / h2 |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const c of cases) {
    const h1 = summary[c.key]?.["bearer-proxy"];
    const h2 = summary[c.key]?.["bearer-proxy-h2"];
    if (!h1 || !h2) continue;
    rows.push(
      `| ${c.key} | ${withRange(h1.rps)} | ${withRange(h2.rps)} | ${ratio(h2.rpsVsBearerProxy)} | ` +
        `${num(h1.cpuSecondsPer10k.median, 3)} | ${num(h2.cpuSecondsPer10k.median, 3)} | ${ratio(h2.perCpuVsBearerProxy)} | ` +
        `${num(h1.p99Ms.median, 2)} / ${num(h2.p99Ms.median, 2)} | ` +
        `${withRange(h1.upstreamConnections)} / ${withRange(h2.upstreamConnections)} | ` +
        `${withRange(h1.upstreamHandshakes)} / ${withRange(h2.upstreamHandshakes)} |`,
    );
  }
  return rows.length > 2 ? rows.join("\n") : null;
}

/** How a verdict reads in the tables: REPORT (a check without a target) as "report only". */
function showVerdict(verdict) {
  return verdict === "REPORT" ? "report only" : verdict;
}

/** A variant's target as the table shows it: on req/s, or on its added CPU against its floor. */
function variantTarget(variant) {
  if (variant.maxFloorMultiple !== undefined)
    return `added CPU ≤ ${variant.maxFloorMultiple}× floor`;
  return variant.minRatio === undefined ? "—" : `≥ ${num(variant.minRatio, 2)}×`;
}

/**
 * Each variant against plain bearer-proxy in the same rounds, with its target's verdict
 * (target "—" and "report only" for a variant without `minRatio`).
 */
function featureCostTable(summary, variants, targets) {
  const rows = [
    "| variant | what is on | plain req/s | variant req/s | req/s ×plain | per CPU-s ×plain | p50 ms plain / variant | p99 ms plain / variant | target | result |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|:---:|",
  ];
  const plain = summary[VARIANT_CASE]?.[PLAIN];
  for (const variant of variants) {
    const own = summary[VARIANT_CASE]?.[variantCompetitorKey(variant.key)];
    if (!plain || !own) continue;
    const verdict =
      targets.find((t) => t.variant === variant.key)?.results[PLAIN].verdict ?? "SKIP";
    rows.push(
      `| ${variant.key} | ${variant.label} (${variant.issue}) | ${withRange(plain.rps)} | ${withRange(own.rps)} | ` +
        `${ratio(own.rpsVsBearerProxy)} | ${ratio(own.perCpuVsBearerProxy)} | ` +
        `${num(plain.p50Ms.median, 2)} / ${num(own.p50Ms.median, 2)} | ` +
        `${num(plain.p99Ms.median, 2)} / ${num(own.p99Ms.median, 2)} | ` +
        `${variantTarget(variant)} | ${showVerdict(verdict)} |`,
    );
  }
  return rows.length > 2 ? rows.join("\n") : null;
}

function tokenSection(token) {
  if (!token) return "_Not measured (bearer-proxy not part of this run)._";
  const lines = [];
  if (token.coldBurst) {
    const b = token.coldBurst;
    const statuses = Object.entries(b.statuses)
      .map(([status, count]) => `${status}: ${count}`)
      .join(", ");
    lines.push(
      `- Cold burst: ${b.concurrency} concurrent requests to a fresh proxy (\`token.prefetch: false\`) → ` +
        `**${b.tokenRequests} token request(s)**; statuses ${statuses}; ` +
        `latency p50 ${num(b.p50Ms, 1)} ms, p99 ${num(b.p99Ms, 1)} ms, max ${num(b.maxMs, 1)} ms.`,
    );
  }
  if (token.coldBurstError) lines.push(`- Cold burst failed: ${token.coldBurstError}`);
  if (token.startToReady) {
    const s = token.startToReady;
    lines.push(
      `- Start to ready (spawn → first \`/readyz\` 200, token prefetched): median ${num(s.median, 0)} ms ` +
        `(${num(s.min, 0)}–${num(s.max, 0)}) over ${s.samples.length} start(s).`,
    );
  }
  if (token.startToReadyError) lines.push(`- Start-to-ready failed: ${token.startToReadyError}`);
  return lines.join("\n");
}

function targetsTable(targets) {
  const rows = [
    "| target | bearer-proxy | result | same, per CPU-s | undici forwarder | fastify-http-proxy |",
    "|---|---:|:---:|---:|---:|---:|",
  ];
  const mark = (r) => (r.verdict === "PASS" ? "✓" : r.verdict === "NOISY" ? "~" : "✗");
  const perCpu = (r) => (r.perCpu === null ? "" : ` (per CPU-s ${num(r.perCpu, 2)})`);
  const show = (r) => (r.value === null ? "—" : `${num(r.value, 2)} ${mark(r)}${perCpu(r)}`);
  for (const t of targets) {
    const bp = t.results["bearer-proxy"];
    rows.push(
      `| ${t.target} | ${bp.value === null ? "—" : num(bp.value, 2)} | ${showVerdict(bp.verdict)} | ` +
        `${bp.perCpu === null ? "—" : num(bp.perCpu, 2)} | ${show(t.results.undici)} | ${show(t.results.fastify)} |`,
    );
  }
  return rows.join("\n");
}

/** The whole report as Markdown. */
export function renderMarkdown({
  meta,
  summary,
  cases,
  token,
  targets,
  order,
  problems,
  spans,
  floors,
}) {
  const parts = [`# bearer-proxy benchmark — ${meta.startedAt}${meta.smoke ? " (smoke)" : ""}`, ""];
  parts.push(
    `Rounds: ${meta.rounds} interleaved (each round runs every case on every competitor in turn` +
      `${meta.fresh ? "; before each round after the first, bearer-proxy, its variants and the Node baselines were started afresh and warmed up (`--fresh`)" : ""}` +
      `${meta.isolate ? "; the other competitors were stopped (SIGSTOP) during each cell (`--isolate`)" : ""}` +
      `${meta.neighbourCpuMs?.median == null ? "" : `; the other competitors used ${meta.neighbourCpuMs.median.toFixed(0)} ms of CPU per cell (median; ${meta.neighbourCpuMs.min.toFixed(0)}–${meta.neighbourCpuMs.max.toFixed(0)})`}); ` +
      `${meta.durationS} s per throughput cell, ${meta.connections} connections, load generator **${meta.generator}**` +
      `${meta.generatorNote ? ` (${meta.generatorNote})` : ""}. Proxy on core ${meta.proxyCore ?? "any"}; ` +
      `load generator and upstream (${meta.upstream === "nginx" ? "nginx" : "bench/upstream.mjs, node:https"}) on core ${meta.loadCore ?? "any"}${meta.pinned ? "" : " (NOT pinned: taskset or a second core missing)"}. ` +
      "Ratios are taken within each round, then the median (min–max) over rounds. CPU is user+system time of the " +
      "proxy process(es) (nginx: master + worker); RSS is sampled every 100 ms. " +
      "*req per CPU-s* (10,000 / CPU s per 10k) is what one fully busy core would serve: on a machine " +
      "shared with other work it is steadier than req/s.",
    "",
  );
  for (const c of cases) {
    if (!summary[c.key]) continue;
    parts.push(`## ${c.label}`, "", throughputTable(summary[c.key], order), "");
  }
  if (summary.latency) {
    parts.push(
      `## Fixed-rate latency: ${meta.rate} req/s GET /small for ${meta.latencyDurationS} s (open loop, from intended send time)`,
      "",
      `Each cell first runs ${meta.latencyWarmupS ?? 0} s at the same rate unrecorded (JIT warm-up, connections open). ` +
        "*Typical-second p99* is the median over the cell's 1-second windows of each window's p99: one " +
        "machine-wide stall decides a whole-run p99 on this VM (direct itself shows it), so both are given. " +
        "An added p99 below zero means direct's run held the bigger stall (verdict NOISY).",
      "",
      latencyTable(summary.latency, order),
      "",
    );
  }
  const h2 = http2Table(summary, cases);
  if (h2) {
    parts.push(
      "## HTTP/2 to the upstream (`upstreams[].http2`)",
      "",
      "bearer-proxy with `http2: true` against itself over HTTP/1.1, ratios within each round. " +
        "Connections used: distinct connections the upstream (nginx) served a request on during " +
        "the cell; handshakes: those of them opened during the cell (each a full TLS handshake; " +
        "the others were kept alive from earlier cells).",
      "",
      h2,
      "",
    );
  }
  const featureCost = featureCostTable(summary, meta.variants ?? [], targets);
  if (featureCost) {
    parts.push(
      "## Feature cost: bearer-proxy variants against plain bearer-proxy (small GET)",
      "",
      "Each variant is the same build with one feature on (its config change, and the request " +
        "headers the load generator sends with every request), measured in the same rounds right " +
        "after plain bearer-proxy. Ratios are taken within each round, then the median (min–max) " +
        "over rounds; the target is on req/s, *per CPU-s* is the same ratio from CPU per request.",
      "",
      featureCost,
      "",
    );
    const spansText = spansMarkdown(spans);
    if (spansText) parts.push(spansText, "");
    if (floors) parts.push(floors, "");
  }
  parts.push("## Token side (bearer-proxy)", "", tokenSection(token), "");
  parts.push("## Targets (issue 8; variants' feature cost)", "", targetsTable(targets), "");
  if (problems.length > 0) parts.push("## Problems", "", ...problems.map((p) => `- ${p}`), "");
  parts.push("## Environment", "");
  for (const [name, value] of Object.entries(meta.environment)) parts.push(`- ${name}: ${value}`);
  if (meta.skipped.length > 0) parts.push(...meta.skipped.map((s) => `- skipped: ${s}`));
  parts.push("");
  return parts.join("\n");
}
