/**
 * DPoP (RFC 9449), proof of possession beside client authentication: one room that both the
 * token request and the header injector call, so neither learns how a proof is made. Per
 * upstream: a key (dpop-key.ts), proofs (proof.ts) and the servers' nonces (nonce-store.ts).
 *
 * The walk: before each request `proofFor(method, url, token?)` gives the `DPoP` field; after
 * each response `noteResponse(...)` takes the server's `DPoP-Nonce` and says whether the server
 * asked for the request again with it (once). Towards the resource server the token goes as
 * `authorization(token)`: `DPoP <token>`.
 */

import { isBearerTokenSyntax } from "../../base/bearer-token.js";
import type { Clock } from "../../base/clock.js";
import type { BearerProxyError } from "../../errors.js";
import { type DpopAlgorithm, type DpopKey, type DpopKeySpec, loadDpopKey } from "./dpop-key.js";
import {
  createNonceStore,
  isUseDpopNonceError,
  type NonceStore,
  type ResponseHeaders,
} from "./nonce-store.js";
import { accessTokenHash, type ProofTarget, proofTarget, signProof } from "./proof.js";

export {
  type DpopAlgorithm,
  type DpopKey,
  type DpopKeyOptions,
  type DpopKeySpec,
  type DpopPublicJwk,
  jwkThumbprint,
  loadDpopKey,
} from "./dpop-key.js";
export {
  createNonceStore,
  dpopNonceOf,
  isUseDpopNonceError,
  type NonceStore,
  type NonceStoreOptions,
  type ResponseHeaders,
} from "./nonce-store.js";
export {
  accessTokenHash,
  createProof,
  normaliseHtu,
  type ProofRequest,
  type ProofTarget,
  proofTarget,
  signProof,
} from "./proof.js";
export { type Challenge, findChallenge, parseChallenges } from "./www-authenticate.js";

/** `upstreams[].dpop`: `{}` for an ephemeral P-256 key, or `{ keyFile, algorithm }`. */
export type DpopSpec = DpopKeySpec;

export interface DpopOptions {
  /** `wallNow` gives `iat`; the timers poll the key file. Default the system clock. */
  clock?: Clock | undefined;
  /** How often the key file is stat()ed; 0 disables polling. Default 5 s. */
  pollIntervalMs?: number | undefined;
  /** A changed key file that cannot be used (the previous key stays in force). */
  onKeyReloadError?: ((error: BearerProxyError) => void) | undefined;
  /** Most origins whose nonce is remembered. Default 256. */
  maxNonceOrigins?: number | undefined;
}

/** The DPoP side of one upstream's requests. */
export interface Dpop {
  /** RFC 7638 thumbprint of the current key: part of the credential's identity. */
  readonly jkt: string;
  readonly algorithm: DpopAlgorithm;
  /** Secret-free facts (algorithm, key kind and source, jkt) for logs and `check`. */
  describe(): string;
  /**
   * The `DPoP` field value for one request: a fresh proof (new `jti`) for `method` and `url`,
   * with the origin's latest nonce, and `ath` when `accessToken` is given (resource servers).
   * Synchronous; make a new one for every attempt, retries included.
   */
  proofFor(method: string, url: string | URL, accessToken?: string): string;
  /** `DPoP <token>` for the Authorization field (RFC 9449 §7.1); throws on a token unfit for a header. */
  authorization(accessToken: string): string;
  /**
   * Call with every response from `url`'s origin: keeps its `DPoP-Nonce`. True when the
   * response is `use_dpop_nonce` (AS: 400 + JSON `error`, pass `body`; RS: 401 +
   * WWW-Authenticate) and the request should be sent once more with a new proof.
   */
  noteResponse(
    url: string | URL,
    status: number,
    headers: ResponseHeaders,
    body?: unknown,
  ): boolean;
  /** Called with the new thumbprint after the key file changed: tokens bound to the old key are useless. */
  onKeyChange(listener: (jkt: string) => void): () => void;
  /** The nonce store (for status and tests). */
  readonly nonces: NonceStore;
  readonly key: DpopKey;
  close(): void;
}

/** Loads the key (an ephemeral one when `spec.keyFile` is unset) and sets up the nonce store. */
export async function createDpop(spec: DpopSpec, options: DpopOptions = {}): Promise<Dpop> {
  const key = await loadDpopKey(spec, {
    clock: options.clock,
    pollIntervalMs: options.pollIntervalMs,
    onReloadError: options.onKeyReloadError,
  });
  const nonces = createNonceStore({ max: options.maxNonceOrigins });
  const wallNow = options.clock ? () => options.clock!.wallNow() : Date.now;
  // The token changes every few minutes, requests come far more often: hash it once.
  let lastToken: string | undefined;
  let lastAth = "";
  // A request's proof and its response's nonce name the same URL string, and a busy upstream
  // path repeats: the last URL is parsed once (WHATWG parsing is most of a proof's non-crypto
  // cost), its origin read once, and the last method and URL's claims template made once.
  let lastUrl = "";
  let lastParsed: URL | undefined;
  let lastOrigin = "";
  let lastTarget: ProofTarget | undefined;
  const parse = (url: string | URL): URL => {
    if (typeof url !== "string") return url;
    if (url !== lastUrl || lastParsed === undefined) {
      lastParsed = new URL(url);
      lastOrigin = lastParsed.origin;
      lastUrl = url;
      lastTarget = undefined;
    }
    return lastParsed;
  };
  const originOf = (url: string | URL): string =>
    typeof url === "string" && url === lastUrl && lastParsed !== undefined
      ? lastOrigin
      : parse(url).origin;

  return {
    get jkt() {
      return key.jkt;
    },
    get algorithm() {
      return key.algorithm;
    },
    describe: () => key.describe(),
    proofFor(method, url, accessToken) {
      const parsed = parse(url);
      const origin = typeof url === "string" ? lastOrigin : parsed.origin;
      let target = typeof url === "string" ? lastTarget : undefined;
      if (target === undefined || target.htm !== method) {
        target = proofTarget(method, parsed);
        if (typeof url === "string") lastTarget = target;
      }
      if (accessToken !== undefined && accessToken !== lastToken) {
        lastAth = accessTokenHash(accessToken);
        lastToken = accessToken;
      }
      return signProof(
        key,
        target,
        wallNow(),
        nonces.get(origin),
        accessToken === undefined ? undefined : lastAth,
      );
    },
    authorization(accessToken) {
      if (!isBearerTokenSyntax(accessToken)) {
        throw new Error("the DPoP token contains characters not allowed in a header");
      }
      return `DPoP ${accessToken}`;
    },
    noteResponse(url, status, headers, body) {
      nonces.update(originOf(url), headers);
      return isUseDpopNonceError(status, headers, body);
    },
    onKeyChange(listener) {
      return key.onChange((changed) => listener(changed.jkt));
    },
    nonces,
    key,
    close() {
      key.close();
    },
  };
}
