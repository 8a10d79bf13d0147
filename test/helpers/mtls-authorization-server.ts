/**
 * A real authorization server that binds tokens to the client certificate (RFC 8705 §3):
 * node-oidc-provider 9 with `features.mTLS` (tls_client_auth and certificate-bound access
 * tokens), the client-credentials grant and one resource indicator whose tokens are JWTs
 * carrying `cnf.x5t#S256`.
 *
 * oidc-provider normally sits behind a TLS terminator and reads the client certificate from it
 * (`features.mTLS.getCertificate`); here it terminates TLS itself: an HTTPS server on 127.0.0.1
 * that asks for a client certificate (`requestCert`) without refusing the handshake, and hands
 * the peer certificate and whether it chains to the test CA to oidc-provider. The same CA signs
 * the server certificate and the client certificates made by {@link issueClientCertificate}.
 *
 * oidc-provider is loaded through ./oidc-provider.ts.
 */
import { createHash, generateKeyPairSync, type JsonWebKey, X509Certificate } from "node:crypto";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import type { TLSSocket } from "node:tls";
import { generate } from "selfsigned";
import { closeNow, loadProvider, oneResourceIndicator } from "./oidc-provider.js";
import { generateCertificates } from "./tls.js";

export interface MtlsAuthorizationServerOptions {
  clientId?: string;
  /** The certificate subject the client is registered with (`tls_client_auth_subject_dn`). */
  subjectDn?: string;
  /** The resource indicator (RFC 8707) tokens are issued for, also their `aud`. */
  resource?: string;
  /** The scope of that resource. Default "read". */
  scope?: string;
  /** Token lifetime in seconds. Default 300. */
  accessTokenTtlSeconds?: number;
}

/** The test CA: it signs the server certificate and every client certificate. */
export interface TestCa {
  caPem: string;
  caKeyPem: string;
}

export interface MtlsAuthorizationServer {
  issuer: string;
  tokenUrl: string;
  jwksUrl: string;
  /** The public keys access tokens are signed with (what `jwksUrl` serves). */
  jwks: { keys: JsonWebKey[] };
  clientId: string;
  subjectDn: string;
  resource: string;
  scope: string;
  /** The CA and a server certificate for 127.0.0.1 it signed (reusable by a resource server). */
  ca: TestCa;
  serverCertificate: { certPem: string; keyPem: string };
  /** Token requests seen: the status answered and the SHA-256 thumbprint of the client certificate. */
  requests: { path: string; status: number; x5tS256: string | undefined }[];
  close(): Promise<void>;
}

/** The context oidc-provider hands its mTLS callbacks (Koa's; only `req` is used). */
interface ProviderContext {
  req: { socket: TLSSocket };
}

export async function startMtlsAuthorizationServer(
  options: MtlsAuthorizationServerOptions = {},
): Promise<MtlsAuthorizationServer> {
  const Provider = await loadProvider();
  const clientId = options.clientId ?? "mtls-client";
  const subjectDn = options.subjectDn ?? `CN=${clientId}`;
  const resource = options.resource ?? "https://resource.test/";
  const scope = options.scope ?? "read";
  const ttlSeconds = options.accessTokenTtlSeconds ?? 300;
  const pki = await generateCertificates();
  const ca = { caPem: pki.caPem, caKeyPem: pki.caKeyPem };
  const requests: MtlsAuthorizationServer["requests"] = [];

  const server: Server = createServer({
    cert: pki.certPem,
    key: pki.keyPem,
    ca: pki.caPem,
    // Ask for a certificate, but let oidc-provider decide what its absence means (it answers
    // invalid_client), as it does behind a terminator that forwards an optional one.
    requestCert: true,
    rejectUnauthorized: false,
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const issuer = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const signing = { kid: "as-es256", alg: "ES256", use: "sig" };
  const peerOf = (ctx: ProviderContext) => ctx.req.socket.getPeerX509Certificate();

  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: clientId,
        grant_types: ["client_credentials"],
        response_types: [],
        redirect_uris: [],
        token_endpoint_auth_method: "tls_client_auth",
        tls_client_auth_subject_dn: subjectDn,
        tls_client_certificate_bound_access_tokens: true,
        // The keystore holds one ES256 key; the client default (RS256) would find none.
        id_token_signed_response_alg: "ES256",
        scope,
      },
    ],
    // The default list names only the secret and JWT methods.
    clientAuthMethods: ["tls_client_auth"],
    jwks: { keys: [{ ...privateKey.export({ format: "jwk" }), ...signing }] },
    scopes: [scope],
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      mTLS: {
        enabled: true,
        certificateBoundAccessTokens: true,
        tlsClientAuth: true,
        getCertificate: (ctx: ProviderContext) => peerOf(ctx),
        // The handshake was not refused; whether the certificate chains to the CA is asked here.
        certificateAuthorized: (ctx: ProviderContext) => ctx.req.socket.authorized,
        // Only the subject DN is registered; the test certificates have a single-RDN subject,
        // which X509Certificate writes as RFC 4514 does ("CN=name").
        certificateSubjectMatches: (ctx: ProviderContext, property: string, expected: string) =>
          property === "tls_client_auth_subject_dn" && peerOf(ctx)?.subject === expected,
      },
      resourceIndicators: oneResourceIndicator(resource, scope, ttlSeconds),
    },
    // Set, so oidc-provider doesn't print its "you SHOULD change" notices.
    clientBasedCORS: () => false,
    ttl: { ClientCredentials: () => ttlSeconds },
  });

  const callback = provider.callback();
  server.on("request", (req, res) => {
    res.on("finish", () => {
      const peer = (req.socket as TLSSocket).getPeerX509Certificate();
      requests.push({
        path: req.url ?? "",
        status: res.statusCode,
        x5tS256: peer === undefined ? undefined : certificateThumbprint(peer),
      });
    });
    callback(req, res);
  });

  return {
    issuer,
    tokenUrl: `${issuer}/token`,
    jwksUrl: `${issuer}/jwks`,
    jwks: { keys: [{ ...publicKey.export({ format: "jwk" }), ...signing }] },
    clientId,
    subjectDn,
    resource,
    scope,
    ca,
    serverCertificate: { certPem: pki.certPem, keyPem: pki.keyPem },
    requests,
    close: () => closeNow(server),
  };
}

/** A client certificate (EC P-256, clientAuth EKU) for `CN=<commonName>`, signed by `ca`. */
export async function issueClientCertificate(
  ca: TestCa,
  commonName: string,
): Promise<{ certPem: string; keyPem: string }> {
  const made = await generate([{ name: "commonName", value: commonName }], {
    keyType: "ec",
    curve: "P-256",
    algorithm: "sha256",
    ca: { key: ca.caKeyPem, cert: ca.caPem },
    extensions: [
      { name: "basicConstraints", cA: false, critical: true },
      { name: "keyUsage", digitalSignature: true, critical: true },
      { name: "extKeyUsage", clientAuth: true },
    ],
  });
  return { certPem: made.cert, keyPem: made.private };
}

/** `x5t#S256` of a certificate (RFC 8705 §3.1): base64url SHA-256 of its DER. */
export function certificateThumbprint(certificate: X509Certificate | string): string {
  const x509 = typeof certificate === "string" ? new X509Certificate(certificate) : certificate;
  return createHash("sha256").update(x509.raw).digest("base64url");
}
