/**
 * Start the upstream, the token emulator and every requested competitor that can run here.
 * A competitor that cannot be had (nginx not installable, bearer-proxy not built) is skipped
 * and said so; one that is there but fails to start is a problem (the run exits non-zero).
 * The bearer-proxy variants (lib/variants.mjs) start right after plain bearer-proxy, so each
 * round measures them next to their reference; a variant whose credential is not accepted
 * counts as failing to start.
 */
import { join } from "node:path";
import { bearerProxyMissing, startBearerProxy, startEmulatorProcess } from "./bearer-proxy.mjs";
import {
  describeDirect,
  startFastifyProxy,
  startNginx,
  startUndiciForwarder,
} from "./competitors.mjs";
import { startOtlpSink } from "./otlp-sink.mjs";
import { makeRestartable } from "./restart.mjs";
import { startUpstream } from "./upstreams.mjs";
import {
  inPlaceCompetitorKey,
  selectVariants,
  startInPlaceFloor,
  startVariant,
  VARIANT_CASE,
} from "./variants.mjs";

/** Competitors `--fresh` starts again before each round (variants: lib/variants.mjs). */
const RESTARTABLE = ["bearer-proxy", "bearer-proxy-h2", "undici", "fastify"];

/**
 * @returns {Promise<{upstream: object, emulator: object|null, competitors: object[]}>}
 *   competitors in the requested order (a, its variants, a′ b c d e).
 */
export async function startAll({ settings, tools, ctx, log, problems, skipped }) {
  const { certs, control, dir, proxyCore, loadCore } = ctx;
  const useNginx =
    settings.upstreamChoice === "nginx" || (settings.upstreamChoice === null && tools.nginx.path);
  if (settings.upstreamChoice === "nginx" && !tools.nginx.path) {
    throw new Error(`--upstream nginx: ${tools.nginx.note}`);
  }
  const upstream = await startUpstream({
    core: loadCore,
    certs,
    control,
    nginxPath: useNginx ? tools.nginx.path : undefined,
    dir,
  });
  log(`${upstream.kind} upstream on ${upstream.url}`);
  let emulator = null;
  const competitors = [];

  /** bearer-proxy over HTTP/1.1 or HTTP/2, or a variant; all share one token emulator. */
  const bearerProxy = async ({ http2 = false, tag = "", configure, env, cli } = {}) => {
    const missing = bearerProxyMissing();
    if (missing) {
      problems.push(`bearer-proxy cannot run: ${missing}`);
      return null;
    }
    if (!emulator) {
      emulator = await startEmulatorProcess({ core: loadCore, certs });
      log(`token emulator on ${emulator.url}`);
    }
    return startBearerProxy({
      core: proxyCore,
      upstream,
      emulator,
      certs,
      dir,
      control,
      http2,
      tag,
      configure,
      env,
      cli,
    });
  };
  const starters = {
    "bearer-proxy": () => bearerProxy(),
    "bearer-proxy-h2": () => bearerProxy({ http2: true, tag: "-h2" }),
    nginx: async () => {
      if (!tools.nginx.path) {
        skipped.push(`nginx: ${tools.nginx.note}`);
        log(`nginx skipped: ${tools.nginx.note}`);
        return null;
      }
      return startNginx({
        core: proxyCore,
        upstream,
        certs,
        nginxPath: tools.nginx.path,
        dir: join(dir, "nginx"),
        control,
      });
    },
    undici: () => startUndiciForwarder({ core: proxyCore, upstream, certs }),
    fastify: () => startFastifyProxy({ core: proxyCore, upstream, certs }),
    direct: async () => describeDirect(upstream),
  };

  const variants = selectVariants(settings.variants);
  // The tracing variants' collector: one sink process on the load core, started when first asked.
  let sink = null;
  const otlpSink = () => {
    sink ??= startOtlpSink({ core: loadCore }).then((started) => {
      log(`OTLP sink on ${started.endpoint("")} (core ${loadCore ?? "any"})`);
      return started;
    });
    return sink;
  };
  const variantStarters = () => {
    if (variants.length === 0) return [];
    if (!settings.cases.includes(VARIANT_CASE)) {
      skipped.push(`bearer-proxy variants: they run in the ${VARIANT_CASE} case, not selected`);
      return [];
    }
    return variants.map((variant) => ({
      key: `bearer-proxy variant ${variant.key}`,
      start: () =>
        startVariant({
          variant,
          dir,
          control,
          startProxy: (configure, tag, env, cli) => bearerProxy({ configure, tag, env, cli }),
          otlpSink,
        }),
    }));
  };

  /** The variants' floors in place: the undici forwarder with each feature's code. */
  const inPlaceStarters = () => {
    if (!settings.cases.includes(VARIANT_CASE)) return [];
    return variants
      .filter((variant) => variant.inPlace)
      .map((variant) => {
        const key = inPlaceCompetitorKey(variant.key);
        return {
          key,
          start: () => startInPlaceFloor({ variant, otlpSink, core: proxyCore, upstream, certs }),
        };
      });
  };

  for (const key of settings.competitors) {
    const started = await startOne(key, starters[key]);
    // --fresh: the Node processes (the JIT's luck is per process); nginx and direct stay.
    if (started && RESTARTABLE.includes(key)) makeRestartable(started, starters[key]);
    // Without their reference, variants have nothing to be a ratio of.
    if (key === "bearer-proxy" && started) {
      for (const variant of variantStarters()) await startOne(variant.key, variant.start);
    }
    if (key === "undici" && started && settings.competitors.includes("bearer-proxy")) {
      for (const floor of inPlaceStarters()) {
        const competitor = await startOne(floor.key, floor.start);
        if (competitor) makeRestartable(competitor, floor.start);
      }
    }
  }
  if (!settings.competitors.includes("bearer-proxy") && variants.length > 0) {
    skipped.push("bearer-proxy variants: plain bearer-proxy (their reference) not selected");
  }
  return { upstream, emulator, competitors };

  async function startOne(key, start) {
    try {
      const competitor = await start();
      if (competitor) {
        competitors.push(competitor);
        log(`${key} ready on ${competitor.baseUrl}`);
      }
      return competitor;
    } catch (error) {
      problems.push(`${key} failed to start: ${error.message}`);
      log(`${key} failed to start: ${error.message}`);
      return null;
    }
  }
}
