/**
 * Which parts of a configuration change can be applied to a running proxy, and which need a
 * restart. Sockets that are already bound (the listeners), options fixed when a server is
 * created, the log destination and the Redis connection can't change in place: a reload that
 * touches any of them is refused whole and reported — never half-applied.
 */
import type { ListenSpec, ProxyConfig } from "../config/proxy-config.js";

/** Limits that are options of the listening servers, fixed when they are created. */
const SERVER_LIMITS = [
  "maxHeaderSizeBytes",
  "maxHeaderCount",
  "headersTimeoutMs",
  "keepAliveTimeoutMs",
  "maxConnections",
] as const;

const listenText = (listen: ListenSpec | undefined) =>
  listen ? `${listen.host}:${listen.port}` : "(main listener)";

/** Config paths whose change needs a restart; empty when `next` can be applied live. */
export function changesNeedingRestart(current: ProxyConfig, next: ProxyConfig): string[] {
  const paths: string[] = [];
  if (listenText(current.listen) !== listenText(next.listen)) paths.push("listen");
  if (listenText(current.admin) !== listenText(next.admin)) paths.push("admin");
  if (current.log.format !== next.log.format) paths.push("log.format");
  // The OpenTelemetry SDK is loaded (or not) once, at start.
  if (current.tracing.exporter !== next.tracing.exporter) paths.push("tracing.exporter");
  if (JSON.stringify(current.tokenCache.redis) !== JSON.stringify(next.tokenCache.redis)) {
    paths.push("tokenCache.redis");
  }
  // The interception CA is loaded once, before the listeners are bound (app/intercept.ts).
  if (JSON.stringify(current.intercept) !== JSON.stringify(next.intercept)) paths.push("intercept");
  // Read once when the dispatcher pool and the admin server are built.
  if (current.egressProxy !== next.egressProxy) paths.push("egressProxy");
  if (current.limits.sustainedOverloadMs !== next.limits.sustainedOverloadMs) {
    paths.push("limits.sustainedOverloadMs");
  }
  for (const limit of SERVER_LIMITS) {
    if (current.limits[limit] !== next.limits[limit]) paths.push(`limits.${limit}`);
  }
  // Upstreams with a listener of their own: the set of bound addresses must stay the same.
  const ownListeners = (config: ProxyConfig) =>
    new Map(
      config.upstreams
        .filter((u) => u.listen !== undefined)
        .map((u) => [u.name, listenText(u.listen)] as const),
    );
  const before = ownListeners(current);
  const after = ownListeners(next);
  for (const name of new Set([...before.keys(), ...after.keys()])) {
    if (before.get(name) !== after.get(name)) paths.push(`upstreams[${name}].listen`);
  }
  return paths;
}
