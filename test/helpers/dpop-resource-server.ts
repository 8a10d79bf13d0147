/**
 * A resource server that checks DPoP proofs the way RFC 9449 §4.3 and §7 ask, with jose (an
 * implementation independent of the one under test): one `DPoP` field; a JWT with `typ`
 * dpop+jwt, an allowed `alg` and a public `jwk` that verifies its signature; `htm` and `htu`
 * naming this request; `iat` within a window; a `jti` never seen before; `ath` matching the
 * presented `Authorization: DPoP` token; that token bound (`cnf.jkt`) to the proof's key; and,
 * when asked, the server's current nonce (401 `use_dpop_nonce` with a `DPoP-Nonce` otherwise).
 *
 * The token's binding is read either from the token itself, a JWT verified against the
 * authorization server's JWKS, or from a callback (for tests without an authorization server).
 * HTTPS on 127.0.0.1 with the test PKI (test/helpers/tls.ts); records every request it saw.
 */
import { createHash, randomBytes } from "node:crypto";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import {
  calculateJwkThumbprint,
  createRemoteJWKSet,
  EmbeddedJWK,
  type JWTPayload,
  jwtVerify,
} from "jose";
import { generateCertificates, type ServerCertificate } from "./tls.js";

export interface DpopResourceServerOptions {
  /** Verify access tokens as JWTs of this authorization server (issuer, audience, JWKS). */
  authorizationServer?: { jwksUrl: string; issuer: string; audience: string };
  /**
   * Or: the thumbprint the presented token is bound to; undefined refuses the token. Used when
   * `authorizationServer` is not given; default: every token is bound to the proof's key.
   */
  expectedJkt?: (accessToken: string) => string | undefined | Promise<string | undefined>;
  /** Demand the current server nonce in every proof (RFC 9449 §9). Default false. */
  requireNonce?: boolean;
  /** After each accepted request, move to a new nonce and announce it in that response. */
  rotateNonceOnSuccess?: boolean;
  /** Largest |now - iat| accepted, seconds. Default 60. */
  iatWindowSeconds?: number;
  /** Proof algorithms accepted. Default ES256, EdDSA, PS256, RS256. */
  algorithms?: readonly string[];
  /** Server certificate and its CA; default a fresh one for 127.0.0.1 (test/helpers/tls.ts). */
  certificate?: ServerCertificate & { caPem: string };
}

/** What the server saw in one request and what it answered. */
export interface SeenDpopRequest {
  method: string;
  /** Path and query as received. */
  path: string;
  /** The Authorization scheme as sent (`DPoP`, `Bearer`, …) or undefined. */
  scheme: string | undefined;
  accessToken: string | undefined;
  /** The raw DPoP field value(s). */
  proof: string | undefined;
  /** Verified proof header and claims (absent when the proof did not verify). */
  header?: Record<string, unknown>;
  claims?: JWTPayload & { htm?: string; htu?: string; ath?: string; nonce?: string };
  /** Thumbprint of the proof's key. */
  jkt?: string;
  status: number;
  /** `use_dpop_nonce`, `invalid_dpop_proof`, `invalid_token`, or undefined when accepted. */
  error: string | undefined;
  /** Why, in words. */
  description: string | undefined;
}

export interface DpopResourceServer {
  /** `https://127.0.0.1:<port>` */
  origin: string;
  /** The CA clients must trust. */
  caPem: string;
  seen: SeenDpopRequest[];
  /** The nonce proofs must carry now (when requireNonce). */
  readonly nonce: string;
  /** Move to a new nonce without telling anyone (the next proof meets use_dpop_nonce). */
  rotateNonce(): string;
  close(): Promise<void>;
}

const DEFAULT_ALGORITHMS = ["ES256", "EdDSA", "PS256", "RS256"];

class Refusal extends Error {
  constructor(
    readonly error: "use_dpop_nonce" | "invalid_dpop_proof" | "invalid_token",
    description: string,
  ) {
    super(description);
  }
}

export async function startDpopResourceServer(
  options: DpopResourceServerOptions = {},
): Promise<DpopResourceServer> {
  const certificate = options.certificate ?? (await defaultCertificate());
  const algorithms = [...(options.algorithms ?? DEFAULT_ALGORITHMS)];
  const windowSeconds = options.iatWindowSeconds ?? 60;
  const jwks = options.authorizationServer
    ? createRemoteJWKSet(new URL(options.authorizationServer.jwksUrl))
    : undefined;
  const seenJti = new Map<string, number>();
  const seen: SeenDpopRequest[] = [];
  let nonce = newNonce();
  let origin = "";

  async function check(
    req: { method?: string; url?: string; headers: Record<string, string | string[] | undefined> },
    record: SeenDpopRequest,
  ): Promise<void> {
    const authorization = req.headers.authorization;
    const match = typeof authorization === "string" ? /^(\S+) +(\S+)$/.exec(authorization) : null;
    record.scheme = match?.[1];
    record.accessToken = match?.[2];
    if (!match || match[1]!.toLowerCase() !== "dpop") {
      throw new Refusal("invalid_token", "expected Authorization: DPoP <token>");
    }
    const accessToken = match[2]!;
    const field = req.headers.dpop;
    if (typeof field !== "string" || field.includes(",")) {
      throw new Refusal("invalid_dpop_proof", "expected exactly one DPoP field");
    }
    record.proof = field;
    let verified: Awaited<ReturnType<typeof jwtVerify>>;
    try {
      // EmbeddedJWK refuses a private jwk and verifies with the header's key.
      verified = await jwtVerify(field, EmbeddedJWK, { typ: "dpop+jwt", algorithms });
    } catch (error) {
      throw new Refusal("invalid_dpop_proof", `proof does not verify: ${(error as Error).message}`);
    }
    const claims = verified.payload as NonNullable<SeenDpopRequest["claims"]>;
    record.header = verified.protectedHeader as Record<string, unknown>;
    record.claims = claims;
    const jkt = await calculateJwkThumbprint(verified.protectedHeader.jwk!);
    record.jkt = jkt;

    if (claims.htm !== req.method) throw new Refusal("invalid_dpop_proof", "htm mismatch");
    const expectedHtu = withoutQuery(new URL(req.url ?? "/", origin));
    const htu = typeof claims.htu === "string" ? URL.parse(claims.htu) : null;
    if (!htu || withoutQuery(htu) !== expectedHtu) {
      throw new Refusal("invalid_dpop_proof", `htu mismatch (expected ${expectedHtu})`);
    }
    if (options.requireNonce && claims.nonce !== nonce) {
      throw new Refusal(
        "use_dpop_nonce",
        claims.nonce === undefined ? "a nonce is required" : "stale nonce",
      );
    }
    const now = Math.floor(Date.now() / 1000);
    if (typeof claims.iat !== "number" || Math.abs(now - claims.iat) > windowSeconds) {
      throw new Refusal("invalid_dpop_proof", "iat outside the acceptance window");
    }
    if (typeof claims.jti !== "string" || claims.jti.length < 16) {
      throw new Refusal("invalid_dpop_proof", "jti missing or too short");
    }
    for (const [jti, until] of seenJti) if (until < now) seenJti.delete(jti);
    if (seenJti.has(`${jkt}:${claims.jti}`))
      throw new Refusal("invalid_dpop_proof", "jti replayed");
    seenJti.set(`${jkt}:${claims.jti}`, now + 2 * windowSeconds);
    const ath = createHash("sha256").update(accessToken, "ascii").digest("base64url");
    if (claims.ath !== ath) throw new Refusal("invalid_dpop_proof", "ath mismatch");

    let boundTo: string | undefined;
    if (jwks && options.authorizationServer) {
      try {
        const { payload } = await jwtVerify(accessToken, jwks, {
          issuer: options.authorizationServer.issuer,
          audience: options.authorizationServer.audience,
          typ: "at+jwt",
        });
        boundTo = (payload.cnf as { jkt?: string } | undefined)?.jkt;
      } catch (error) {
        throw new Refusal("invalid_token", `access token invalid: ${(error as Error).message}`);
      }
    } else {
      boundTo = options.expectedJkt ? await options.expectedJkt(accessToken) : jkt;
    }
    if (boundTo !== jkt) {
      throw new Refusal("invalid_token", "the token is not bound to the proof's key (cnf.jkt)");
    }
  }

  const server: Server = createServer(
    { cert: certificate.certPem, key: certificate.keyPem },
    (req, res) => {
      req.resume();
      const record: SeenDpopRequest = {
        method: req.method ?? "",
        path: req.url ?? "",
        scheme: undefined,
        accessToken: undefined,
        proof: undefined,
        status: 200,
        error: undefined,
        description: undefined,
      };
      seen.push(record);
      check(req, record).then(
        () => {
          if (options.rotateNonceOnSuccess) nonce = newNonce();
          const headers: Record<string, string> = { "content-type": "application/json" };
          if (options.requireNonce) headers["dpop-nonce"] = nonce;
          res.writeHead(200, headers);
          res.end(JSON.stringify({ ok: true, path: record.path, jkt: record.jkt }));
        },
        (error: unknown) => {
          const refusal =
            error instanceof Refusal ? error : new Refusal("invalid_token", String(error));
          record.status = 401;
          record.error = refusal.error;
          record.description = refusal.message;
          const headers: Record<string, string> = {
            "content-type": "application/json",
            "www-authenticate": `DPoP error="${refusal.error}", error_description="${refusal.message.replace(/["\\]/g, "")}", algs="${algorithms.join(" ")}"`,
          };
          if (options.requireNonce) headers["dpop-nonce"] = nonce;
          res.writeHead(401, headers);
          res.end(JSON.stringify({ error: refusal.error, error_description: refusal.message }));
        },
      );
    },
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  origin = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    origin,
    caPem: certificate.caPem,
    seen,
    get nonce() {
      return nonce;
    },
    rotateNonce() {
      nonce = newNonce();
      return nonce;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function defaultCertificate(): Promise<ServerCertificate & { caPem: string }> {
  const { certPem, keyPem, caPem } = await generateCertificates();
  return { certPem, keyPem, caPem };
}

function newNonce(): string {
  return randomBytes(16).toString("base64url");
}

function withoutQuery(url: URL): string {
  return `${url.origin}${url.pathname}`;
}
