/**
 * A token endpoint over real TLS that really authenticates clients the way IdPs do: it verifies
 * private_key_jwt / client assertions with the registered PUBLIC key (node:crypto verify, the
 * JOSE rules written out here independently of the signer), checks iss/sub/aud/exp/jti, kid and
 * x5t#S256 when registered, and for tls-client-auth requires a client certificate signed by its
 * client CA whose SHA-256 fingerprint is registered. It records every request it saw.
 */
import {
  constants,
  createHash,
  createPublicKey,
  type KeyObject,
  verify,
  X509Certificate,
} from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer, type Server } from "node:https";
import type { TLSSocket } from "node:tls";

export interface RegisteredClient {
  /** Public key (PEM, SPKI or certificate) that verifies this client's assertions. */
  publicKeyPem?: string;
  /** Required `kid` header. */
  keyId?: string;
  /** Required `x5t#S256` header. */
  x5tS256?: string;
  /** Expected `aud`; default the endpoint's token URL. */
  audience?: string;
  /** Expected `iss` of an externally issued assertion (client-assertion-file); default client id. */
  issuer?: string;
  /** Expected `sub` of such an assertion; default client id. */
  subject?: string;
  /** SHA-256 fingerprint (colon hex, as Node prints it) of the client certificate (tls-client-auth). */
  certificateFingerprint256?: string;
}

export interface SeenRequest {
  fields: Record<string, string>;
  headers: IncomingMessage["headers"];
  jwtHeader?: Record<string, unknown>;
  jwtPayload?: Record<string, unknown>;
  /** Fingerprint of the client certificate presented, if any. */
  peerFingerprint256?: string;
  outcome: "granted" | string;
}

export interface VerifyingEndpoint {
  url: string;
  tokenUrl: string;
  seen: SeenRequest[];
  clients: Map<string, RegisteredClient>;
  close(): Promise<void>;
}

const ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

export async function startVerifyingEndpoint(options: {
  certPem: string;
  keyPem: string;
  /** CA whose client certificates the server asks for (tls-client-auth). */
  clientCaPem?: string;
  clients: Record<string, RegisteredClient>;
}): Promise<VerifyingEndpoint> {
  const clients = new Map(Object.entries(options.clients));
  const seen: SeenRequest[] = [];
  const usedJtis = new Set<string>();
  let tokenUrl = "";
  let issued = 0;
  const server: Server = createServer(
    {
      cert: options.certPem,
      key: options.keyPem,
      ...(options.clientCaPem
        ? // Ask for a certificate but let the handler answer invalid_client, as IdPs do.
          { ca: options.clientCaPem, requestCert: true, rejectUnauthorized: false }
        : {}),
    },
    (req, res) => {
      void handle(req, res).catch(() => {
        res.statusCode = 500;
        res.end();
      });
    },
  );

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (tokenUrl !== "" && req.url !== new URL(tokenUrl).pathname) {
      // Anything else is the API: it echoes the Authorization it received.
      req.resume();
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ authorization: req.headers.authorization ?? null }));
      return;
    }
    let body = "";
    for await (const chunk of req) body += chunk;
    const fields = Object.fromEntries(new URLSearchParams(body));
    const record: SeenRequest = { fields, headers: req.headers, outcome: "" };
    seen.push(record);
    const socket = req.socket as TLSSocket;
    const peer = socket.getPeerCertificate?.();
    if (peer && socket.authorized && peer.fingerprint256)
      record.peerFingerprint256 = peer.fingerprint256;
    const refuse = (status: number, error: string, description: string) => {
      record.outcome = `${error}: ${description}`;
      res.writeHead(status, { "content-type": "application/json", connection: "close" });
      res.end(JSON.stringify({ error, error_description: description }));
    };
    if (fields.grant_type !== "client_credentials")
      return refuse(400, "unsupported_grant_type", "");
    if (fields.client_secret !== undefined || req.headers.authorization !== undefined) {
      return refuse(400, "invalid_request", "this client may not use a secret");
    }
    const clientId = fields.client_id;
    const client = clientId === undefined ? undefined : clients.get(clientId);
    if (!client || clientId === undefined) return refuse(401, "invalid_client", "unknown client");
    if (fields.client_assertion !== undefined || fields.client_assertion_type !== undefined) {
      if (fields.client_assertion_type !== ASSERTION_TYPE) {
        return refuse(400, "invalid_request", "wrong client_assertion_type");
      }
      const problem = checkAssertion(fields.client_assertion ?? "", clientId, client, record);
      if (problem) return refuse(401, "invalid_client", problem);
    } else if (client.certificateFingerprint256) {
      if (record.peerFingerprint256 === undefined) {
        return refuse(401, "invalid_client", "a client certificate is required");
      }
      if (record.peerFingerprint256 !== client.certificateFingerprint256) {
        return refuse(401, "invalid_client", "not this client's certificate");
      }
    } else {
      return refuse(401, "invalid_client", "no client authentication");
    }
    record.outcome = "granted";
    issued++;
    // A new connection per request: a rotated client certificate shows on the next request.
    res.writeHead(200, {
      "content-type": "application/json",
      "cache-control": "no-store",
      connection: "close",
    });
    res.end(
      JSON.stringify({
        access_token: `at-${clientId}-${issued}`,
        token_type: "Bearer",
        expires_in: 600,
      }),
    );
  }

  function checkAssertion(
    jwt: string,
    clientId: string,
    client: RegisteredClient,
    record: SeenRequest,
  ): string | undefined {
    const parts = jwt.split(".");
    if (parts.length !== 3) return "assertion is not a compact JWS";
    const [h, p, s] = parts as [string, string, string];
    const header = JSON.parse(Buffer.from(h, "base64url").toString("utf8"));
    const payload = JSON.parse(Buffer.from(p, "base64url").toString("utf8"));
    record.jwtHeader = header;
    record.jwtPayload = payload;
    if (!client.publicKeyPem) return "no key registered";
    const key = createPublicKey(client.publicKeyPem);
    if (!verifySignature(header.alg, key, Buffer.from(`${h}.${p}`), Buffer.from(s, "base64url"))) {
      return `signature does not verify (${header.alg})`;
    }
    if (client.keyId !== undefined && header.kid !== client.keyId) return "wrong kid";
    if (client.x5tS256 !== undefined && header["x5t#S256"] !== client.x5tS256)
      return "wrong x5t#S256";
    if (payload.iss !== (client.issuer ?? clientId)) return "wrong iss";
    if (payload.sub !== (client.subject ?? clientId)) return "wrong sub";
    if (payload.aud !== (client.audience ?? tokenUrl)) return "wrong aud";
    const now = Date.now() / 1000;
    if (typeof payload.exp !== "number" || payload.exp <= now) return "assertion expired";
    if (typeof payload.jti === "string") {
      if (usedJtis.has(payload.jti)) return "jti replayed";
      usedJtis.add(payload.jti);
    }
    return undefined;
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  const url = `https://127.0.0.1:${port}`;
  tokenUrl = `${url}/oauth2/v2.0/token`;
  return {
    url,
    tokenUrl,
    seen,
    clients,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** JOSE signature verification (RFC 7518 §3.3–3.5, RFC 8037 §3.1). */
function verifySignature(alg: unknown, key: KeyObject, data: Buffer, signature: Buffer): boolean {
  switch (alg) {
    case "RS256":
      return key.asymmetricKeyType === "rsa" && verify("sha256", data, key, signature);
    case "PS256":
      return verify(
        "sha256",
        data,
        { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 },
        signature,
      );
    case "ES256":
      // JOSE wants r||s (64 bytes), never DER.
      return (
        signature.length === 64 &&
        verify("sha256", data, { key, dsaEncoding: "ieee-p1363" }, signature)
      );
    case "EdDSA":
      return key.asymmetricKeyType === "ed25519" && verify(null, data, key, signature);
    default:
      return false;
  }
}

/** x5t#S256 of a PEM certificate, computed the test's own way. */
export function thumbprintOf(certPem: string): string {
  return createHash("sha256").update(new X509Certificate(certPem).raw).digest("base64url");
}
