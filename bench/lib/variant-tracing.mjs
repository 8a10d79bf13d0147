/**
 * The tracing variants (issue 25): bearer-proxy exporting over OTLP/HTTP to the counting sink
 * (lib/otlp-sink.mjs, a process of its own on the load core), and, after the matrix, how many
 * of the spans the variant should have exported arrived. A span the batch processor drops (its
 * queue is full: the sink took spans slower than they were made) is never serialized or sent,
 * so a variant that drops measures less work than it claims; this is where that shows.
 */
/** The proxy makes a SERVER and a CLIENT span per sampled request (src/observability/tracing-sdk.ts). */
export const SPANS_PER_REQUEST = 2;
/** Below this share of the expected spans, an always-sampled variant's cost is understated. */
export const MIN_RECEIVED_SHARE = 0.99;

/**
 * Tracing on through the standard environment with `sampler` (OTEL_TRACES_SAMPLER and its
 * argument), exporting to the sink under the path `/<key>` so each variant's spans are counted
 * apart. `ratio` is the share of requests the sampler records. The load generator sends no
 * `traceparent`, so every request is a root and the parent-based samplers decide by their root
 * sampler.
 */
export function tracingVariant({ key, ratio, sampler }) {
  return async ({ otlpSink }) => {
    const sink = await otlpSink();
    return {
      configure: (config) => ({ ...config, tracing: { exporter: "otlp" } }),
      headers: {},
      env: otlpEnv(sink, key, sampler),
      spans: {
        ratio,
        received: async () => (await sink.spans())[`/${key}/v1/traces`] ?? 0,
      },
    };
  };
}

/**
 * The OTEL_* environment of a tracing process, bearer-proxy or the forwarder: the sink under
 * `/<path>`, protobuf, `sampler`. One place, so the variant and its floor in place export alike.
 */
function otlpEnv(sink, path, sampler) {
  return {
    OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint(path),
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
    ...sampler,
  };
}

/**
 * The same tracing in the minimal undici forwarder (lib/variants.mjs `inPlace`): its spans go to
 * the sink under `/<key>-in-place`, apart from the variant's.
 */
export function tracingInPlace({ key, sampler }) {
  return async ({ otlpSink }) => {
    const sink = await otlpSink();
    return {
      feature: "tracing",
      env: otlpEnv(sink, `${key}-in-place`, sampler),
    };
  };
}

/** Requests the proxy answered so far: the sum of its `bearer_proxy_requests_total` series. */
async function requestsAnswered(competitor, control) {
  const { status, text } = await control.send("GET", `${competitor.adminUrl}/metrics`);
  if (status !== 200) throw new Error(`GET /metrics answered ${status}`);
  let total = 0;
  for (const line of text.split("\n")) {
    const match = /^bearer_proxy_requests_total(?:\{[^}]*\})? (\S+)/.exec(line);
    if (match) total += Number(match[1]);
  }
  return total;
}

/**
 * `--fresh` restarts a tracing variant between rounds: these hooks (lib/restart.mjs) bank the
 * outgoing process's answered requests (read before it stops) and logged drops (after: its
 * shutdown reports what was left), so `accountSpans` counts every process of the run. The
 * sink counts per variant path across processes already.
 */
export function spanAccountKeeper(control) {
  return {
    beforeStop: async (competitor) => {
      const earlier = earlierProcesses(competitor);
      earlier.requestsAnswered += await requestsAnswered(competitor, control);
    },
    afterStop: (competitor) => {
      const earlier = earlierProcesses(competitor);
      const drops = competitor.spanDrops();
      earlier.queueFull += drops.queueFull;
      earlier.exportFailed += drops.exportFailed;
      if (competitor.child.signalCode === "SIGKILL") earlier.killed += 1;
    },
  };
}

function earlierProcesses(competitor) {
  competitor.earlierProcesses ??= { requestsAnswered: 0, queueFull: 0, exportFailed: 0, killed: 0 };
  return competitor.earlierProcesses;
}

/**
 * For each tracing variant among `competitors`: the requests it answered over the whole run
 * (warm-up and the start-up check included: its own /metrics, and its earlier processes' under
 * `--fresh`), then stop it — SIGTERM, whose
 * shutdown exports the spans still queued (src/main.ts) — and read what the sink received and
 * what the proxy logged as dropped. Call after the matrix; the variants serve nothing after.
 */
export async function accountSpans(competitors, control, log) {
  const accounts = [];
  for (const competitor of competitors) {
    if (!competitor.spans) continue;
    const account = {
      variant: competitor.variant.key,
      samplingRatio: competitor.spans.ratio,
      spansPerRequest: SPANS_PER_REQUEST,
    };
    const earlier = earlierProcesses(competitor);
    try {
      account.requestsAnswered =
        earlier.requestsAnswered + (await requestsAnswered(competitor, control));
    } catch (error) {
      account.error = `requests answered unknown: ${error.message}`;
    }
    await competitor.stop();
    // Killed rather than stopped: its last spans were never flushed.
    account.flushed = earlier.killed === 0 && competitor.child.signalCode !== "SIGKILL";
    account.spansReceived = await competitor.spans.received();
    const drops = competitor.spanDrops();
    account.droppedLogged = {
      queueFull: earlier.queueFull + drops.queueFull,
      exportFailed: earlier.exportFailed + drops.exportFailed,
    };
    if (account.requestsAnswered > 0) {
      const made = SPANS_PER_REQUEST * account.requestsAnswered;
      account.expectedSpans = made * account.samplingRatio;
      account.receivedShare = account.spansReceived / account.expectedSpans;
      account.impliedSamplingRatio = account.spansReceived / made;
      account.chanceShare = chanceShare(account.requestsAnswered, account.samplingRatio);
    }
    account.understated = understated(account);
    log(`spans: ${spansLine(account)}`);
    accounts.push(account);
  }
  return accounts;
}

/**
 * How far from the expected count chance alone takes a ratio sampler's (two standard deviations
 * of the binomial count of sampled traces, as a share of the expected): 0 when every request is
 * sampled.
 */
function chanceShare(requests, ratio) {
  if (ratio >= 1) return 0;
  return (2 * Math.sqrt(requests * ratio * (1 - ratio))) / (requests * ratio);
}

/**
 * True when the variant provably exported fewer spans than it made: an always-sampled one short
 * of MIN_RECEIVED_SHARE, or any that logged drops. (A ratio sampler's count varies by chance, a
 * few % in a short run, so its shortfall alone proves nothing.)
 */
function understated(account) {
  const { droppedLogged: d } = account;
  if (d.queueFull + d.exportFailed > 0) return true;
  return account.samplingRatio === 1 && (account.receivedShare ?? 0) < MIN_RECEIVED_SHARE;
}

function num(value, digits = 0) {
  if (typeof value !== "number" || !Number.isFinite(value)) return "—";
  return value.toLocaleString("en-US", {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
}

/** One account as a sentence (the report's line under the feature-cost table, and the log). */
export function spansLine(a) {
  const made = `${SPANS_PER_REQUEST} × ${a.samplingRatio === 1 ? "" : `${a.samplingRatio} × `}${num(a.requestsAnswered)} requests answered`;
  const expected =
    a.expectedSpans === undefined
      ? `an unknown number expected (${a.error ?? "no request answered"})`
      : `${a.samplingRatio === 1 ? "" : "~"}${num(a.expectedSpans)} expected (${made}; ${num(100 * a.receivedShare, 1)}%` +
        `${a.chanceShare > 0 ? `, chance alone ±${num(100 * a.chanceShare, 1)}%` : ""})`;
  const implied =
    a.impliedSamplingRatio === undefined
      ? ""
      : `, sampling ratio ${num(a.impliedSamplingRatio, 3)} (set: ${a.samplingRatio})`;
  const failed =
    a.droppedLogged.exportFailed > 0
      ? `, ${num(a.droppedLogged.exportFailed)} in failed exports`
      : "";
  return (
    `${a.variant}: ${num(a.spansReceived)} spans received of ${expected}${implied}; ` +
    `${num(a.droppedLogged.queueFull)} dropped by the proxy's queue${failed} (as logged)` +
    `${a.flushed ? "" : "; the proxy was killed before it flushed its queue"}`
  );
}

/** The Markdown under the feature-cost table: one line per tracing variant, and a warning. */
export function spansMarkdown(accounts) {
  if (!accounts || accounts.length === 0) return null;
  const lines = [
    `Spans (counted by the OTLP sink; expected: ${SPANS_PER_REQUEST} per sampled request × the requests ` +
      `the variant answered over the run, warm-up and start-up check included, from its own ` +
      "`bearer_proxy_requests_total`; drops as the proxy logged them: once a minute at most, and what is left at its shutdown):",
    "",
    ...accounts.map((a) => `- ${spansLine(a)}`),
  ];
  for (const a of accounts.filter((x) => x.understated)) {
    const logged = a.droppedLogged.queueFull + a.droppedLogged.exportFailed;
    lines.push(
      "",
      `**${a.variant}: the figure understates the cost of tracing**: ${num(a.spansReceived)} of ` +
        `${num(a.expectedSpans)} spans (${num(100 * (a.receivedShare ?? 0), 1)}%) reached the sink` +
        `${logged > 0 ? ` and the proxy logged at least ${num(logged)} dropped` : ""}; a span the ` +
        "batch processor drops is never serialized or sent, so the variant did less work than " +
        "bearer-proxy with tracing would.",
    );
  }
  return lines.join("\n");
}
