/**
 * The readiness policy's default depends on the shape of the deployment. A sidecar serves one
 * app with one client: without its token the pod is useless, so "no token → not ready" (the
 * app's Service stops sending it traffic it cannot serve). A gateway serves many tenants, each
 * with its own client: one tenant's broken credential must not take every replica out of
 * rotation at once (all replicas share the same IdP and the same broken secret), so it is ready
 * whenever it can serve, and the failure shows where it belongs: /status, metrics and that
 * tenant's own 503s.
 */
import type { ReadinessConfig, RequireTokens, SecretSource, UpstreamConfig } from "./types.js";

/** The configured policy, or the default for the shape of `upstreams`. */
export function readinessConfig(
  configured: RequireTokens | undefined,
  upstreams: readonly UpstreamConfig[],
): ReadinessConfig {
  if (configured !== undefined) return { requireTokens: configured, chosenBy: "config" };
  return countClients(upstreams) <= 1
    ? { requireTokens: "all", chosenBy: "one-client" }
    : { requireTokens: "none", chosenBy: "several-clients" };
}

/**
 * Distinct OAuth clients: a client id at a token endpoint's origin. One app using both API
 * versions (two token paths, one client) is still one client.
 */
function countClients(upstreams: readonly UpstreamConfig[]): number {
  const clients = new Set<string>();
  for (const u of upstreams) {
    clients.add(`${new URL(u.token.tokenUrl).origin} ${sourceKey(u.token.clientId)}`);
  }
  return clients.size;
}

function sourceKey(source: SecretSource): string {
  return source.kind === "file" ? `file:${source.path}` : `inline:${source.value}`;
}
