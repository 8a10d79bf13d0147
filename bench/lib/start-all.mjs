/**
 * Start the upstream, the token emulator and every requested competitor that can run here.
 * A competitor that cannot be had (nginx not installable, bearer-proxy not built) is skipped
 * and said so; one that is there but fails to start is a problem (the run exits non-zero).
 */
import { join } from "node:path";
import { bearerProxyMissing, startBearerProxy, startEmulatorProcess } from "./bearer-proxy.mjs";
import {
  describeDirect,
  findFreePort,
  startFastifyProxy,
  startNginx,
  startUndiciForwarder,
} from "./competitors.mjs";
import { startNginxUpstream, startNodeUpstream } from "./upstreams.mjs";

/**
 * @returns {Promise<{upstream: object, emulator: object|null, competitors: object[]}>}
 *   competitors in the requested order (a b c d e).
 */
export async function startAll({ settings, tools, ctx, log, problems, skipped }) {
  const { certs, control, dir, proxyCore, loadCore } = ctx;
  const useNginx =
    settings.upstreamChoice === "nginx" || (settings.upstreamChoice === null && tools.nginx.path);
  if (settings.upstreamChoice === "nginx" && !tools.nginx.path) {
    throw new Error(`--upstream nginx: ${tools.nginx.note}`);
  }
  const upstream = useNginx
    ? await startNginxUpstream({
        core: loadCore,
        certs,
        control,
        nginxPath: tools.nginx.path,
        dir: join(dir, "upstream"),
        port: await findFreePort(),
      })
    : await startNodeUpstream({ core: loadCore, certs, control });
  log(`${upstream.kind} upstream on ${upstream.url}`);
  let emulator = null;
  const competitors = [];

  /** bearer-proxy over HTTP/1.1 or HTTP/2 to the upstream; both share one token emulator. */
  const bearerProxy = async (http2) => {
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
      tag: http2 ? "-h2" : "",
    });
  };
  const starters = {
    "bearer-proxy": () => bearerProxy(false),
    "bearer-proxy-h2": () => bearerProxy(true),
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

  for (const key of settings.competitors) {
    try {
      const competitor = await starters[key]();
      if (competitor) {
        competitors.push(competitor);
        log(`${key} ready on ${competitor.baseUrl}`);
      }
    } catch (error) {
      problems.push(`${key} failed to start: ${error.message}`);
      log(`${key} failed to start: ${error.message}`);
    }
  }
  return { upstream, emulator, competitors };
}
