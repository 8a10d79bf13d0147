/**
 * A real authorization server for DPoP tests: node-oidc-provider 9 in-process on 127.0.0.1
 * (plain http: the proxy's token client needs `allowInsecureHttp`), with the client-credentials
 * grant, DPoP (RFC 9449) with server nonces, and one resource indicator whose tokens are JWTs
 * (so a resource server can read `cnf.jkt` after verifying them against `jwksUrl`).
 *
 * oidc-provider is loaded through ./oidc-provider.ts.
 */
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { closeNow, loadProvider, oneResourceIndicator } from "./oidc-provider.js";

export interface DpopAuthorizationServerOptions {
  clientId?: string;
  /** Default: 32 random bytes, base64url. */
  clientSecret?: string;
  /** How the client authenticates at the token endpoint. Default `client_secret_post`. */
  authMethod?: "client_secret_post" | "client_secret_basic";
  /** The resource indicator (RFC 8707) tokens are issued for, also their `aud`. */
  resource?: string;
  /** The scope of that resource; a token request without `scope` gets none. Default "read". */
  scope?: string;
  /** Demand a server nonce in every proof (RFC 9449 §8). Default true. */
  requireNonce?: boolean;
  /** Token lifetime in seconds. Default 300. */
  accessTokenTtlSeconds?: number;
  /** `dpop_signing_alg_values_supported`. Default ES256, EdDSA, PS256, RS256. */
  dpopAlgorithms?: readonly string[];
  /** Tokens issued to this client need a proof (`dpop_bound_access_tokens`). Default true. */
  dpopBoundAccessTokens?: boolean;
}

export interface DpopAuthorizationServer {
  issuer: string;
  tokenUrl: string;
  jwksUrl: string;
  clientId: string;
  clientSecret: string;
  authMethod: "client_secret_post" | "client_secret_basic";
  resource: string;
  scope: string;
  /** Token requests seen: method, whether a DPoP proof came, the status answered. */
  requests: { method: string; path: string; dpop: boolean; status: number }[];
  /** The oidc-provider instance (untyped), for tests that need more. */
  provider: unknown;
  close(): Promise<void>;
}

export async function startDpopAuthorizationServer(
  options: DpopAuthorizationServerOptions = {},
): Promise<DpopAuthorizationServer> {
  const Provider = await loadProvider();
  const clientId = options.clientId ?? "dpop-client";
  const clientSecret = options.clientSecret ?? randomBytes(32).toString("base64url");
  const authMethod = options.authMethod ?? "client_secret_post";
  const resource = options.resource ?? "https://resource.test/";
  const scope = options.scope ?? "read";
  const requireNonce = options.requireNonce ?? true;
  const requests: DpopAuthorizationServer["requests"] = [];

  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  // The key the AS signs its JWT access tokens with (published at jwks_uri).
  const signingJwk = {
    ...generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ format: "jwk" }),
    kid: "as-es256",
    alg: "ES256",
    use: "sig",
  };

  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        grant_types: ["client_credentials"],
        response_types: [],
        redirect_uris: [],
        token_endpoint_auth_method: authMethod,
        // The keystore holds one ES256 key; the client default (RS256) would find none.
        id_token_signed_response_alg: "ES256",
        dpop_bound_access_tokens: options.dpopBoundAccessTokens ?? true,
        scope,
      },
    ],
    jwks: { keys: [signingJwk] },
    scopes: [scope],
    enabledJWA: {
      dPoPSigningAlgValues: [...(options.dpopAlgorithms ?? ["ES256", "EdDSA", "PS256", "RS256"])],
    },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      dPoP: {
        enabled: true,
        nonceSecret: randomBytes(32),
        requireNonce: () => requireNonce,
      },
      resourceIndicators: oneResourceIndicator(
        resource,
        scope,
        options.accessTokenTtlSeconds ?? 300,
      ),
    },
    // Set, so oidc-provider doesn't print its "you SHOULD change" notices.
    clientBasedCORS: () => false,
    ttl: { ClientCredentials: () => options.accessTokenTtlSeconds ?? 300 },
  });

  const callback = provider.callback();
  server.on("request", (req, res) => {
    res.on("finish", () =>
      requests.push({
        method: req.method ?? "",
        path: req.url ?? "",
        dpop: req.headers.dpop !== undefined,
        status: res.statusCode,
      }),
    );
    callback(req, res);
  });

  return {
    issuer,
    tokenUrl: `${issuer}/token`,
    jwksUrl: `${issuer}/jwks`,
    clientId,
    clientSecret,
    authMethod,
    resource,
    scope,
    requests,
    provider,
    close: () => closeNow(server),
  };
}
