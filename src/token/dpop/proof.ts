/**
 * One DPoP proof (RFC 9449 §4.2): a JWT signed by the DPoP key that names the request it goes
 * with (`htm`, `htu`), when it was made (`iat`), is never reused (`jti`), and, towards a
 * resource server, which access token it accompanies (`ath`, §7.1) and the server's nonce.
 */
import { createHash, randomUUID } from "node:crypto";
import { base64url } from "../client-auth/jws.js";
import type { DpopKey } from "./dpop-key.js";

export interface ProofRequest {
  /** The request's method, as sent. */
  htm: string;
  /** The request's URL; query and fragment are dropped (see {@link normaliseHtu}). */
  htu: string | URL;
  /** The server's latest `DPoP-Nonce`, when it demanded one. */
  nonce?: string | undefined;
  /** The access token sent with the request (resource servers); sets `ath`. */
  accessToken?: string | undefined;
  /** `accessTokenHash(accessToken)` computed already (a caller that caches it); wins. */
  ath?: string | undefined;
}

/** RFC 9110 §9.1: a method is a token. */
const METHOD = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** A compact JWS proof for one request; `nowWallMs` gives `iat`. Synchronous. */
export function createProof(
  key: Pick<DpopKey, "signJson">,
  request: ProofRequest,
  nowWallMs: number = Date.now(),
): string {
  const ath =
    request.ath ??
    (request.accessToken === undefined ? undefined : accessTokenHash(request.accessToken));
  return signProof(key, proofTarget(request.htm, request.htu), nowWallMs, request.nonce, ath);
}

/**
 * What proofs for one method and URL share: the JSON text around `jti` and `iat`. Made once
 * per target (a caller keeps the last one); throws like createProof on a bad method or URL.
 */
export interface ProofTarget {
  readonly htm: string;
  readonly htu: string;
  /** `","htm":"GET","htu":"https://…","iat":` */
  readonly middle: string;
}

export function proofTarget(htm: string, url: string | URL): ProofTarget {
  if (!METHOD.test(htm)) throw new TypeError("DPoP htm is not an HTTP method");
  const htu = normaliseHtu(url);
  // A method is a token and needs no escaping; the URL is quoted by JSON.stringify, once.
  return { htm, htu, middle: `","htm":"${htm}","htu":${JSON.stringify(htu)},"iat":` };
}

/**
 * A proof for `target`: the claims are a template filled in (RFC 9449 §4.2: `jti`, `htm`,
 * `htu`, `iat`, then `nonce` and `ath` when given), not an object serialized per proof. `ath`
 * is base64url (accessTokenHash) and a nonce is quoted; jose reads the result (the tests).
 */
export function signProof(
  key: Pick<DpopKey, "signJson">,
  target: ProofTarget,
  nowWallMs: number,
  nonce?: string,
  ath?: string,
): string {
  // 122 random bits (≥ 96, RFC 9449 §4.2 wants enough entropy to make a collision unlikely).
  let claims = `{"jti":"${randomUUID()}${target.middle}${Math.floor(nowWallMs / 1000)}`;
  if (nonce !== undefined) claims += `,"nonce":${JSON.stringify(nonce)}`;
  if (ath !== undefined) claims += `,"ath":"${ath}"`;
  return key.signJson(`${claims}}`);
}

/**
 * RFC 9449 §4.2 `htu`: the target URI without query and fragment. The WHATWG parser lowercases
 * scheme and host, drops a default port and resolves dot segments, the normalisation §4.3 has
 * the server apply (RFC 3986 §6.2.2, §6.2.3) before it compares.
 */
export function normaliseHtu(url: string | URL): string {
  const parsed = typeof url === "string" ? new URL(url) : url;
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") {
    throw new TypeError(`DPoP htu must be an http(s) URL, found ${parsed.protocol}`);
  }
  return `${parsed.origin}${parsed.pathname}`;
}

/** RFC 9449 §4.2 `ath`: base64url SHA-256 of the access token's ASCII. */
export function accessTokenHash(accessToken: string): string {
  return base64url(createHash("sha256").update(accessToken, "ascii").digest());
}
