/**
 * The readiness policy's default depends on the shape of the deployment. A sidecar serves one
 * app with one credential: without its token the pod is useless, so "no token → not ready" (the
 * app's Service stops sending it traffic it cannot serve). A gateway holds several credentials —
 * tenants with clients of their own, or one client asking for many APIs (an `audience`, `scope`
 * or parameter per upstream, common with Auth0, Okta and Entra ID): one credential the IdP
 * refuses must not take every replica out of rotation at once (all replicas share the same IdP
 * and the same refusal), so it is ready whenever it can serve, and the failure shows where it
 * belongs: /status, metrics and that upstream's own 503s.
 *
 * A credential is what the token registry shares a token by (token/credential-identity.ts), so
 * anything that makes the IdP issue another token, and could make it refuse one, counts. Counting
 * client ids instead judged "one client, many audiences" a sidecar, and one refused audience made
 * /readyz 503 on every replica (issue 22).
 */
import { credentialIdentity } from "./credential-identity.js";
import type { ReadinessConfig, RequireTokens, UpstreamConfig } from "./proxy-config.js";

/** The configured policy, or the default for the shape of `upstreams`. */
export function readinessConfig(
  configured: RequireTokens | undefined,
  upstreams: readonly UpstreamConfig[],
): ReadinessConfig {
  if (configured !== undefined) return { requireTokens: configured, chosenBy: "config" };
  // The labels predate the rule: "one-client" now means one credential.
  return hasOneCredential(upstreams)
    ? { requireTokens: "all", chosenBy: "one-client" }
    : { requireTokens: "none", chosenBy: "several-clients" };
}

/**
 * Whether every upstream asks for the same token. Stops at the first other credential, so a
 * gateway of thousands costs a couple of identities; only a true one-credential config reads all.
 */
function hasOneCredential(upstreams: readonly UpstreamConfig[]): boolean {
  const first = upstreams[0];
  if (first === undefined) return true;
  const identity = credentialIdentity(first.token);
  return upstreams.every(
    (u) => u.token === first.token || credentialIdentity(u.token) === identity,
  );
}
