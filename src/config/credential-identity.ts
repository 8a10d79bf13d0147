/**
 * One identity per credential: everything that can change the token a provider issues (token
 * URL, client id, secret or key, scope, parameters, headers, TLS identity, version, format, auth
 * method). The in-memory registry key, the Redis key and the AES-GCM associated data of a shared
 * token all derive from `credentialIdentity`.
 *
 * It is derived structurally from the whole `TokenEndpointSpec`, not from a hand-kept list of
 * fields: a field added to the spec is part of the identity without anyone remembering to add it.
 * (Two hand-kept lists drifted once: the Redis key left out token headers and the TLS client
 * identity, so two tenants sharing a client id got each other's token from Redis — issue 14.)
 *
 * A function of the configuration alone, so it lives with it: config counts distinct
 * credentials by it (readiness-defaults.ts), the token room keys its registry and Redis by it,
 * and the pacers key a credential's pauses by it.
 */
import { createHash } from "node:crypto";
import { hashValue } from "../base/fingerprint.js";
import type { SecretSource, TokenEndpointSpec, UpstreamConfig } from "./proxy-config.js";

/** How secret values appear in an identity. */
export interface IdentityOptions {
  /**
   * The client id's actual value: replicas agree on it even when they read it from different
   * file paths. Without it, the id is represented like any other secret source.
   */
  clientId?: string | undefined;
  /**
   * Leave the client secret out. The shared cache does: its encryption key is derived from the
   * secret, so a rotated secret simply misses instead of keying a new entry.
   */
  omitClientSecret?: boolean;
  /**
   * The RFC 7638 thumbprint of the DPoP key in use (`spec.dpop` set). A DPoP-bound token is
   * useful only with its key, so the key, not where it was read from, is part of the identity:
   * the jkt replaces `dpop.keyFile` (replicas with another key never share; replicas keeping one
   * key at different paths do).
   */
  dpopJkt?: string | undefined;
}

/**
 * The canonical identity of the credential `spec` describes: a JSON text with object keys
 * sorted, inline secrets replaced by a hash and file secrets by their path (never a value).
 */
export function credentialIdentity(spec: TokenEndpointSpec, options: IdentityOptions = {}): string {
  const fields: Record<string, unknown> = { ...spec };
  // Which CA is trusted decides which server we accept, not which token it issues: replicas that
  // keep their CA bundle at different paths still share one credential.
  fields.tls = { ...spec.tls, caFile: undefined };
  if (options.clientId !== undefined) fields.clientId = { kind: "value", value: options.clientId };
  if (options.omitClientSecret) delete fields.clientSecret;
  if (options.dpopJkt !== undefined && spec.dpop !== undefined) {
    fields.dpop = { ...spec.dpop, keyFile: undefined, jkt: options.dpopJkt };
  }
  return canonicalJson(fields);
}

/**
 * The key replicas share a token under in Redis, also the AES-GCM associated data of the stored
 * value: the identity with the client id's value, the DPoP key's thumbprint (when `spec.dpop` is
 * set) and without the secret, hashed.
 */
export function sharedCredentialKey(
  spec: TokenEndpointSpec,
  clientId: string,
  options: { dpopJkt?: string | undefined } = {},
): string {
  return createHash("sha256")
    .update(
      credentialIdentity(spec, { clientId, omitClientSecret: true, dpopJkt: options.dpopJkt }),
    )
    .digest("hex");
}

/**
 * The in-memory registry key: upstreams with equal keys share one token source. The identity,
 * plus the token policy (how the token is managed: two policies can't share a refresh schedule).
 */
export function localCredentialKey(upstream: UpstreamConfig): string {
  return `${credentialIdentity(upstream.token)}\n${canonicalJson(upstream.tokenPolicy)}`;
}

function isSecretSource(value: unknown): value is SecretSource {
  if (typeof value !== "object" || value === null) return false;
  const v = value as Record<string, unknown>;
  return (
    (v.kind === "inline" && typeof v.value === "string") ||
    (v.kind === "file" && typeof v.path === "string")
  );
}

/** JSON with sorted object keys and undefined dropped; inline secret sources are hashed. */
function canonicalJson(value: unknown): string {
  return JSON.stringify(canonical(value));
}

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (typeof value !== "object" || value === null) return value;
  if (isSecretSource(value)) {
    return value.kind === "file" ? `file:${value.path}` : `inline:${hashValue(value.value)}`;
  }
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) {
    const item = (value as Record<string, unknown>)[key];
    if (item !== undefined) out[key] = canonical(item);
  }
  return out;
}
