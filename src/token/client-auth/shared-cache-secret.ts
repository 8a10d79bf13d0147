/**
 * What the Redis shared cache derives its AES-GCM key from (redis-crypto.ts), per method. The key
 * must be something every replica of a credential holds and a reader of Redis does not:
 * - `body` / `basic`: the client secret;
 * - `private-key-jwt` / `tls-client-auth`: the private key, which replicas share as they share a
 *   secret (taken as its PKCS#8 DER, so two PEM renderings of one key agree);
 * - `client-assertion-file`: nothing. Each pod's projected service-account token differs and a
 *   token is public to whoever can read the IdP's metadata, so such tokens are never shared
 *   through Redis: each replica fetches its own (said once in the log and on /status).
 */
import { createPrivateKey } from "node:crypto";
import type { ClientAuthMethod } from "../../config/proxy-config.js";
import type { ClientCredentials } from "./client-auth-types.js";

/** The key material for the shared cache, or undefined when tokens must not be shared. */
export function sharedCacheSecret(
  method: ClientAuthMethod,
  credentials: ClientCredentials,
): string | undefined {
  switch (method) {
    case "body":
    case "basic":
      return credentials.clientSecret;
    case "private-key-jwt":
    case "tls-client-auth": {
      const pem = credentials.clientKeyPem;
      if (pem === undefined) return undefined;
      try {
        const der = createPrivateKey({ key: pem, format: "pem" }).export({
          type: "pkcs8",
          format: "der",
        });
        return `private-key:${der.toString("base64")}`;
      } catch {
        return undefined; // an unusable key fails the token request itself, with its own error
      }
    }
    case "client-assertion-file":
      return undefined;
  }
}

/** Why a method's tokens are not shared through Redis, or undefined when they are. */
export function notSharedReason(method: ClientAuthMethod): string | undefined {
  return method === "client-assertion-file"
    ? "client-assertion-file tokens are not shared through Redis (each pod's assertion differs, so replicas hold no common key to encrypt them); each replica fetches its own"
    : undefined;
}
