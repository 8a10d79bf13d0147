/**
 * bearer-proxy variants: the same dist/cli.js with one feature switched on, measured against
 * plain bearer-proxy in the same interleaved rounds, so a feature's cost is a ratio taken
 * within each round ("feature cost" in the report) rather than a comparison across runs.
 *
 * A variant is
 *   { key, label, issue, minRatio?, floor?, maxFloorMultiple?,
 *     prepare({dir, otlpSink}) → {configure, headers, withoutHeaders, env, spans} }
 * - `prepare` writes whatever the variant needs (users file, keys, …) into `dir`, a directory of
 *   its own inside the run's temporary directory (a proxy re-reads a users file that changes);
 *   `otlpSink()` resolves with the run's counting OTLP sink (lib/otlp-sink.mjs, started on the
 *   load core on first call). It returns
 *   - `configure(config)`: plain bearer-proxy's config object (lib/bearer-proxy.mjs
 *     `bearerProxyConfig`) → the variant's; return a new object, do not mutate;
 *   - `headers`: request headers the load generator sends on every request (wrk `-H`);
 *   - `withoutHeaders` (optional): the status a request without `headers` must get (e.g. 407);
 *   - `env` (optional): extra environment for the proxy process (the tracing variants' OTEL_*);
 *   - `spans` (optional, tracing): `{ratio, received()}`, the share of requests sampled and the
 *     spans the sink got from this variant, for lib/variant-tracing.mjs `accountSpans`.
 *   - `cli` (optional): another build's dist/cli.js to run instead of the measured one's.
 *   Before it is measured, a GET through the variant with `headers` must answer 200 and one
 *   without them `withoutHeaders`; otherwise the run fails (exit 1): a variant that refuses
 *   the credential measures nothing but its error path.
 * - `minRatio`: the target, req/s of the variant ÷ plain bearer-proxy's in the same round
 *   (median over rounds), checked in lib/targets.mjs like issue 8's targets. Without one the
 *   variant is *report only*: its ratio is measured and shown (target "—", result "report
 *   only"), never PASS or FAIL, and never counts toward the exit status (`--strict` included).
 * - `floor`: the feature's own work in a loop (lib/variant-floor.mjs runs it after the matrix and
 *   reports the variant's added CPU per request against it, and the ratio ceiling it implies):
 *   a bench/feature-floor.mjs row's key, or `{script: "gate-floor", row, minus?, plusVariant?}`
 *   for a bench/gate-floor.mjs row, less the `minus` row (what plain pays at the same gate),
 *   plus the added CPU the `plusVariant` variant measured in the same run (the bytes of the
 *   feature's header, when that variant ran);
 *   `maxFloorMultiple`: a target on that multiple (added ÷ floor, median over rounds), checked
 *   like `minRatio` (a variant has one or the other, or neither).
 * - `inPlace` (optional): `({otlpSink}) → {feature, env}`, the feature's floor *in place*: the
 *   minimal undici forwarder with `--feature <feature>` (bench/baselines/undici-forwarder.mjs:
 *   the same dist/ code per request, nothing else of bearer-proxy) runs as competitor
 *   `undici+<key>` right after the undici forwarder, small case only; its added CPU over the
 *   forwarder, within each round, is what the feature costs a proxy that does nothing else
 *   (lib/variant-floor.mjs reports it beside the loop's floor).
 * Variants run the `VARIANT_CASE` only (the cheapest request, where a per-request cost shows
 * most), also in smoke mode so CI keeps them working.
 */
import { mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { startUndiciForwarder } from "./competitors.mjs";
import { makeRestartable } from "./restart.mjs";
import {
  prepareBasicHeaderOnly,
  prepareCallersBasic,
  prepareCallersServiceAccount,
  prepareServiceAccountHeaderOnly,
} from "./variant-callers.mjs";
import { spanAccountKeeper, tracingInPlace, tracingVariant } from "./variant-tracing.mjs";

/** The competitor key of a variant's in-place floor (the undici forwarder with the feature). */
export function inPlaceCompetitorKey(variantKey) {
  return `undici+${variantKey}`;
}

/**
 * A variant's floor in place: the minimal undici forwarder running the feature's own dist/ code
 * per request (`variant.inPlace`), on `core` against `upstream`. bench/run.mjs's matrix and
 * bench/coscheduled.mjs both start it here.
 */
export async function startInPlaceFloor({ variant, otlpSink, core, upstream, certs }) {
  const { feature, env } = await variant.inPlace({ otlpSink });
  const started = await startUndiciForwarder({
    core,
    upstream,
    certs,
    args: ["--feature", feature],
    env,
    key: inPlaceCompetitorKey(variant.key),
    label: `undici forwarder + ${variant.key}'s code (its floor in place)`,
  });
  return Object.assign(started, { inPlaceOf: variant.key });
}

/** The case variants are measured in. */
export const VARIANT_CASE = "small";
/** The reference every variant is divided by. */
export const PLAIN = "bearer-proxy";

/** What operators run in production: a tenth of the traces, a client's decision kept. */
const RATIO_SAMPLER = {
  OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
  OTEL_TRACES_SAMPLER_ARG: "0.1",
};

export const BEARER_PROXY_VARIANTS = [
  {
    // Report only: plain's own config in a variant's slot. Its ratio to plain is the run's
    // noise band: a variant within it of its target is the machine, not the feature (issue 33).
    // With BENCH_AA_CLI (another build's dist/cli.js) it is an A/B of two builds instead, in
    // the same interleaved rounds: a change's before/after without a run's drift between them.
    key: "aa-plain",
    label: process.env.BENCH_AA_CLI
      ? `plain bearer-proxy from ${process.env.BENCH_AA_CLI} (A/B of two builds)`
      : "plain bearer-proxy again, in a variant's slot (A/A control: the run's noise)",
    issue: "#33",
    prepare: async () => ({
      configure: (config) => config,
      headers: {},
      // Resolved where the bench was started, not where the proxy runs (the repository).
      cli: process.env.BENCH_AA_CLI ? resolve(process.env.BENCH_AA_CLI) : undefined,
    }),
  },
  {
    key: "callers-basic",
    label: "caller allowed by `user` (Basic, bcrypt cost 10)",
    issue: "#23, #33",
    minRatio: 0.97,
    // The check, and what carrying the Basic header costs (basic-header-open, this run).
    floor: { script: "gate-floor", row: "caller-basic", plusVariant: "basic-header-open" },
    prepare: prepareCallersBasic,
  },
  {
    // Report only: callers-basic's floor, the header's bytes without the check (issue 33).
    key: "basic-header-open",
    label: "callers-basic's `Proxy-Authorization: Basic` sent to an open gateway (no `allow`)",
    issue: "#33",
    prepare: prepareBasicHeaderOnly,
  },
  {
    key: "callers-sa",
    label: "caller allowed by `serviceAccount` (Bearer ES256 JWT, JWKS file)",
    issue: "#23, #33",
    minRatio: 0.95,
    // The check, and what node:http pays for the ~0.9 KiB header (sa-header-open, this run).
    floor: { script: "gate-floor", row: "caller-sa", plusVariant: "sa-header-open" },
    prepare: prepareCallersServiceAccount,
  },
  {
    // Report only: callers-sa's floor, the header's bytes without the check (issue 33).
    key: "sa-header-open",
    label: "callers-sa's `Proxy-Authorization: Bearer <JWT>` sent to an open gateway (no `allow`)",
    issue: "#33",
    prepare: prepareServiceAccountHeaderOnly,
  },
  {
    key: "dpop",
    label: "DPoP (RFC 9449): `dpop: {}`, a fresh ES256 proof on every upstream request",
    // Issue #33: the proxy pays at most 1.3× what the proof itself costs.
    issue: "#24, #33",
    floor: "dpop-es256",
    maxFloorMultiple: 1.3,
    inPlace: async () => ({ feature: "dpop", env: {} }),
    prepare: prepareDpop,
  },
  {
    key: "rate-limit",
    label: "a rateLimit that never binds (1,000,000/s, burst 0): the pacing gate's own cost",
    issue: "#26",
    minRatio: 0.95,
    // Plain pays the open gate (an unlimited pacer) already.
    floor: { script: "gate-floor", row: "pacing-limit", minus: "pacing-open" },
    prepare: async () => ({
      configure: (config) => ({
        ...config,
        upstreams: config.upstreams.map((u) => ({
          ...u,
          rateLimit: { requests: 1_000_000, per: "1s" },
        })),
      }),
      headers: {},
    }),
  },
  {
    key: "tracing",
    label: "OpenTelemetry on, every request sampled, exported over OTLP/HTTP to a counting sink",
    issue: "#25, #33",
    minRatio: 0.75,
    floor: "tracing-protobuf",
    inPlace: tracingInPlace({ key: "tracing", sampler: { OTEL_TRACES_SAMPLER: "always_on" } }),
    prepare: tracingVariant({
      key: "tracing",
      ratio: 1,
      sampler: { OTEL_TRACES_SAMPLER: "always_on" },
    }),
  },
  {
    // What operators run in production: a request that is not sampled must cost next to nothing.
    key: "tracing-sampled",
    label:
      "OpenTelemetry on, `parentbased_traceidratio` 0.1 (a tenth of the traces sampled), OTLP/HTTP to a counting sink",
    issue: "#25, #33",
    minRatio: 0.95,
    floor: "tracing-ratio-0.1",
    inPlace: tracingInPlace({ key: "tracing-sampled", sampler: RATIO_SAMPLER }),
    prepare: tracingVariant({ key: "tracing-sampled", ratio: 0.1, sampler: RATIO_SAMPLER }),
  },
];

/**
 * `dpop: {}` on the one upstream: an ephemeral P-256 key, `Authorization: DPoP` and a proof per
 * request. The emulator answers `token_type: DPoP` to a token request with a proof (it verifies
 * none); the upstream counts `DPoP` with a proof as injected. The client sends nothing new.
 */
async function prepareDpop() {
  return {
    configure: (config) => ({
      ...config,
      upstreams: config.upstreams.map((upstream) => ({ ...upstream, dpop: {} })),
    }),
    headers: {},
  };
}

export const ALL_VARIANTS = BEARER_PROXY_VARIANTS.map((v) => v.key);

/**
 * A variant's `floor` as `{script, row, minus?, plusVariant?}` (a bare key is a
 * bench/feature-floor.mjs row), or undefined without one.
 */
export function floorSpec(variant) {
  const { floor } = variant;
  if (floor === undefined) return undefined;
  return typeof floor === "string" ? { script: "feature-floor", row: floor } : floor;
}

/** The competitor key a variant is measured under. */
export function variantCompetitorKey(variantKey) {
  return `${PLAIN}+${variantKey}`;
}

/** The variants named in `keys`, in registry order. */
export function selectVariants(keys) {
  return BEARER_PROXY_VARIANTS.filter((v) => keys.includes(v.key));
}

/**
 * Prepare and start one variant through `startProxy(configure)` (which starts bearer-proxy with
 * the given config transform and resolves with its competitor), then prove its credential
 * works. Resolves with the competitor, re-keyed, carrying `headers` for the load generator
 * (and `spans` for a tracing variant).
 */
export async function startVariant({ variant, dir, control, startProxy, otlpSink }) {
  const ownDir = join(dir, `variant-${variant.key}`);
  await mkdir(ownDir, { mode: 0o755 });
  const prepared = await variant.prepare({ dir: ownDir, otlpSink });
  const proxy = await startProxy(prepared.configure, `-${variant.key}`, prepared.env, prepared.cli);
  const competitor = {
    ...proxy,
    key: variantCompetitorKey(variant.key),
    label: `bearer-proxy + ${variant.key}`,
    variant,
    headers: prepared.headers,
    ...(prepared.spans ? { spans: prepared.spans } : {}),
  };
  await verifiedOrStopped(competitor, prepared, control);
  // --fresh: the same prepared config in a new process, checked the same way; a tracing
  // variant first banks what the outgoing process answered and dropped (accountSpans).
  return makeRestartable(
    competitor,
    async () => {
      const next = await startProxy(
        prepared.configure,
        `-${variant.key}`,
        prepared.env,
        prepared.cli,
      );
      await verifiedOrStopped({ ...competitor, ...next }, prepared, control);
      return next;
    },
    prepared.spans ? spanAccountKeeper(control) : {},
  );
}

async function verifiedOrStopped(competitor, prepared, control) {
  try {
    await verifyVariant(competitor, prepared, control);
  } catch (error) {
    await competitor.stop();
    throw error;
  }
}

async function verifyVariant(competitor, prepared, control) {
  const url = `${competitor.baseUrl}/small`;
  const withHeaders = await control.send("GET", url, { headers: prepared.headers });
  if (withHeaders.status !== 200) {
    throw new Error(
      `a GET with the variant's headers answered ${withHeaders.status}, not 200: ${withHeaders.text.slice(0, 300)}`,
    );
  }
  if (prepared.withoutHeaders !== undefined) {
    const without = await control.send("GET", url);
    if (without.status !== prepared.withoutHeaders) {
      throw new Error(
        `a GET without the variant's headers answered ${without.status}, not ${prepared.withoutHeaders}`,
      );
    }
  }
}

/**
 * One check per variant, in lib/targets.mjs's check shape: the variant's req/s ÷ plain
 * bearer-proxy's, reported in the `bearer-proxy` column (the product under test). A variant
 * without `minRatio` gives a `reportOnly` check (verdict REPORT: shown, never judged).
 */
export function variantChecks(variants) {
  return variants.map((variant) => {
    const key = variantCompetitorKey(variant.key);
    const own = (s, c) => (c === PLAIN ? s[VARIANT_CASE]?.[key] : undefined);
    if (variant.maxFloorMultiple !== undefined) {
      // lib/variant-floor.mjs attachFloorCosts put it there (null: the floor was not measured).
      return {
        target: `${variant.key} (${variant.issue}): added CPU per request ≤ ${variant.maxFloorMultiple}× its floor (${variant.floor})`,
        limit: variant.maxFloorMultiple,
        higherIsBetter: false,
        variant: variant.key,
        value: (s, _t, c) => own(s, c)?.floorCost?.multiple.median ?? null,
      };
    }
    const reportOnly = variant.minRatio === undefined;
    return {
      target: reportOnly
        ? `${variant.key} (${variant.issue}): small GET × plain bearer-proxy (req/s), report only`
        : `${variant.key} (${variant.issue}): small GET ≥ ${variant.minRatio}× plain bearer-proxy (req/s)`,
      limit: variant.minRatio ?? null,
      ...(reportOnly ? { reportOnly: true } : {}),
      higherIsBetter: true,
      variant: variant.key,
      value: (s, _t, c) => own(s, c)?.rpsVsBearerProxy.median ?? null,
      perCpu: (s, c) => own(s, c)?.perCpuVsBearerProxy.median ?? null,
    };
  });
}
