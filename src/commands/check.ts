/**
 * `bearer-proxy check`: diagnose each upstream step by step, the way an operator would by hand
 * (dig, nc, openssl s_client, curl the token endpoint, curl the API), printing ✓/✗ per step and a
 * plain-language hint on failure. Later steps that depend on a failed one are skipped. Never
 * prints the secret or the token (only its fingerprint); with `dpop`, never the private key or a
 * proof (only the key's kind, algorithm and RFC 7638 thumbprint).
 */

import { createScrubber, type Scrubber } from "../admin/redact.js";
import { fingerprint } from "../base/fingerprint.js";
import type { ProxyConfig, UpstreamConfig, UpstreamTls } from "../config/proxy-config.js";
import { BearerProxyError } from "../errors.js";
import { decodeJwtPayload } from "../token/client-auth/jws.js";
import { CHECK_CREDENTIALS_HINT } from "../token/credential-hint.js";
import type { Dpop } from "../token/dpop/index.js";
import { describeTokenUrl } from "../token/response-text.js";
import { checkDns, checkTcp, checkTls, type Outcome } from "./check-network.js";
import { clientProbePath, notRoutedHere, probeApi, probeRoute } from "./check-probe.js";
import { fetchToken, selectUpstreams } from "./token.js";

export interface CheckArgs {
  config: ProxyConfig;
  /** Only this upstream; default all. */
  upstream?: string | undefined;
  /** Also GET this path (relative to the base URL) with the token. */
  probePath?: string | undefined;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

/** Run every check; resolves with 0 when all pass, else 1. */
export async function runCheck(args: CheckArgs): Promise<number> {
  const chosen = selectUpstreams(args.config, args.upstream, { all: true });
  if (!chosen.ok) {
    args.stderr.write(`bearer-proxy check: ${chosen.message}\n`);
    return 1;
  }
  let failures = 0;
  for (const upstream of chosen.upstreams) {
    failures += await checkUpstream(args, upstream);
  }
  const unprobed = unprobedPath(args, chosen.upstreams);
  if (unprobed !== undefined) {
    args.stderr.write(`\nbearer-proxy check: ${unprobed}\n`);
    return 1;
  }
  if (failures === 0) {
    args.stdout.write("\nall checks passed\n");
    return 0;
  }
  args.stderr.write(`\nbearer-proxy check: ${failures} check${failures === 1 ? "" : "s"} failed\n`);
  return 1;
}

/** Print an upstream's steps; returns the number of failed steps. */
async function checkUpstream(args: CheckArgs, upstream: UpstreamConfig): Promise<number> {
  const secrets: string[] = [];
  const configScrub = createScrubber([upstream]);
  const scrub: Scrubber = (text) =>
    secrets.reduce((acc, s) => (s ? acc.split(s).join("[redacted]") : acc), configScrub(text));
  let failures = 0;
  const print = (label: string, outcome: Outcome | { skipped: string }) => {
    if ("skipped" in outcome) {
      args.stdout.write(scrub(`  - ${label.padEnd(6)} skipped: ${outcome.skipped}\n`));
      return;
    }
    args.stdout.write(scrub(`  ${outcome.ok ? "✓" : "✗"} ${label.padEnd(6)} ${outcome.detail}\n`));
    if (!outcome.ok) {
      failures += 1;
      if (outcome.hint) args.stdout.write(scrub(`           hint: ${outcome.hint}\n`));
    }
  };

  args.stdout.write(
    scrub(`upstream ${upstream.name}: ${upstream.baseUrl} (API version ${upstream.apiVersion})\n`),
  );
  const endpoints = distinctEndpoints(upstream);
  const reachable = new Map<string, boolean>();
  for (const endpoint of endpoints) {
    const prefix = endpoints.length > 1 ? `${endpoint.label}: ` : "";
    if (args.config.egressProxy) {
      const why = `connections go through the egress proxy ${describeTokenUrl(args.config.egressProxy)}`;
      for (const label of ["DNS", "TCP", "TLS"]) print(label, { skipped: `${prefix}${why}` });
      reachable.set(endpoint.origin, true);
      continue;
    }
    const steps: [string, () => Promise<Outcome>][] = [
      ["DNS", () => checkDns(endpoint.host)],
      ["TCP", () => checkTcp(endpoint.host, endpoint.port, upstream.timeouts.connectMs)],
      [
        "TLS",
        () => checkTls(endpoint.host, endpoint.port, endpoint.tls, upstream.timeouts.connectMs),
      ],
    ];
    let ok = true;
    for (const [label, run] of steps) {
      if (!ok) {
        print(label, { skipped: `${prefix}an earlier step failed` });
        continue;
      }
      const outcome = await run();
      print(label, { ...outcome, detail: `${prefix}${outcome.detail}` });
      ok = outcome.ok;
    }
    reachable.set(endpoint.origin, ok);
  }

  const tokenOrigin = new URL(upstream.token.tokenUrl).origin;
  let token: string | undefined;
  let dpop: Dpop | undefined;
  if (!reachable.get(tokenOrigin)) {
    print("token", { skipped: "the token endpoint is not reachable" });
  } else {
    const result = await fetchToken(args.config, upstream);
    dpop = result.dpop;
    // Client authentication (issue 16): which key, kid, x5t#S256, assertion exp; never a key or a JWT.
    const authFailed = !result.ok && isClientAuthError(result.error);
    if (result.clientAuthFacts.length > 0) {
      print("auth", { ok: true, detail: result.clientAuthFacts.join("; ") });
    } else if (authFailed) {
      print("auth", { ok: false, detail: result.message, hint: clientAuthHint(result.error) });
    }
    // DPoP (issue 24): the key's kind, source, algorithm and jkt; never the key or a proof.
    const dpopFailed = !result.ok && isDpopKeyError(result.error);
    if (dpop) {
      print("DPoP", { ok: true, detail: dpop.describe().replace(/^dpop: /, "") });
    } else if (dpopFailed) {
      print("DPoP", { ok: false, detail: result.message, hint: DPOP_KEY_HINT });
    }
    if (authFailed) {
      print("token", { skipped: "client authentication failed" });
    } else if (dpopFailed) {
      print("token", { skipped: "no DPoP key to prove possession with" });
    } else if (result.ok) {
      token = result.token.accessToken;
      secrets.push(token);
      print("token", {
        ok: true,
        detail: describeToken(upstream, result.token, result.durationMs, dpop),
      });
    } else {
      print("token", {
        ok: false,
        detail: result.message,
        hint: tokenHint(result.error, upstream),
      });
      // What a provider that does not answer RFC 6749 errors said (scrubbed: error-excerpt.ts).
      if (result.excerpt !== undefined) {
        args.stdout.write(scrub(`           body: ${result.excerpt}\n`));
      }
    }
  }

  try {
    if (args.probePath !== undefined) {
      const route = probeRoute(args.config, upstream, args.probePath);
      if (!route.routed) print("API", { skipped: notRoutedHere(route) });
      else if (!token) print("API", { skipped: "no token" });
      else if (!reachable.get(upstream.origin)) {
        print("API", { skipped: "the API is not reachable" });
      } else print("API", await probeApi(args.config, upstream, route, token, dpop));
    }
  } finally {
    dpop?.close();
  }
  return failures;
}

/**
 * When `--probe-path` routes to none of the checked upstreams, what was asked for did not happen:
 * a failure that says where the path goes instead.
 */
function unprobedPath(args: CheckArgs, upstreams: readonly UpstreamConfig[]): string | undefined {
  const { probePath } = args;
  if (probePath === undefined) return undefined;
  const routes = upstreams.map((upstream) => probeRoute(args.config, upstream, probePath));
  if (routes.some((route) => route.routed)) return undefined;
  const elsewhere = routes
    .map((route) => (route.routed ? undefined : route.elsewhere))
    .find(Boolean);
  const what = `--probe-path ${clientProbePath(probePath)} was probed nowhere`;
  return elsewhere === undefined
    ? `${what}: no route of the upstreams checked matches it`
    : `${what}: it routes to upstream ${elsewhere} (check it with --upstream ${elsewhere})`;
}

interface Endpoint {
  label: string;
  origin: string;
  host: string;
  port: number;
  tls: UpstreamTls;
}

/** The token endpoint's and the API's origins, once each when they are the same. */
function distinctEndpoints(upstream: UpstreamConfig): Endpoint[] {
  const make = (label: string, url: string, tls: UpstreamTls): Endpoint => {
    const parsed = new URL(url);
    const port = parsed.port ? Number(parsed.port) : parsed.protocol === "http:" ? 80 : 443;
    return {
      label,
      origin: parsed.origin,
      host: parsed.hostname.replace(/^\[|\]$/g, ""),
      port,
      tls,
    };
  };
  const tokenEndpoint = make("token endpoint", upstream.token.tokenUrl, upstream.token.tls);
  const api = make("API", upstream.baseUrl, upstream.tls);
  if (tokenEndpoint.origin === api.origin) return [{ ...api, label: "token endpoint and API" }];
  return [tokenEndpoint, api];
}

function describeToken(
  upstream: UpstreamConfig,
  token: {
    accessToken: string;
    expiresInSeconds: number | undefined;
    scope: string | undefined;
    expiresInClamped: boolean;
    notes?: readonly { message: string }[];
  },
  durationMs: number,
  dpop: Dpop | undefined,
): string {
  const lifetime =
    token.expiresInSeconds === undefined
      ? `no expires_in (assuming ${Math.round(upstream.tokenPolicy.defaultExpiresInMs / 1000)} s)`
      : `lifetime ${token.expiresInSeconds} s${token.expiresInClamped ? " (clamped)" : ""}`;
  const notes = (token.notes ?? []).map((note) => `; ${note.message}`).join("");
  const binding = dpop ? `; ${describeBinding(token.accessToken, dpop)}` : "";
  return `200 from ${describeTokenUrl(upstream.token.tokenUrl)} in ${durationMs} ms; granted scope ${token.scope === undefined ? "(none stated)" : JSON.stringify(token.scope)}; ${lifetime}; token fingerprint ${fingerprint(token.accessToken)}${binding}${notes}`;
}

/**
 * token_type DPoP was checked already; a JWT token also shows what it is bound to (`cnf.jkt`,
 * RFC 9449 §6.1), which must be our key's thumbprint. An opaque token's binding is not visible.
 */
function describeBinding(accessToken: string, dpop: Dpop): string {
  const cnf = decodeJwtPayload(accessToken)?.cnf;
  const jkt = typeof cnf === "object" && cnf !== null ? (cnf as { jkt?: unknown }).jkt : undefined;
  if (typeof jkt !== "string")
    return "token_type DPoP (bound to the key by the server; not visible in the token)";
  return jkt === dpop.jkt
    ? "token_type DPoP, cnf.jkt is the key's thumbprint"
    : `token_type DPoP, but cnf.jkt ${JSON.stringify(jkt.slice(0, 64))} is not the key's thumbprint ${dpop.jkt}`;
}

/** A plain-language next step for a failed token request. */
function tokenHint(error: unknown, upstream: UpstreamConfig): string | undefined {
  if (!(error instanceof BearerProxyError)) return undefined;
  const details = error.details ?? {};
  const idpError = typeof details.idpError === "string" ? details.idpError : undefined;
  const status = typeof details.status === "number" ? details.status : undefined;
  // The token engine's own hint when it points at the Basic encoding (credential-hint.ts).
  if (typeof details.hint === "string" && details.hint !== CHECK_CREDENTIALS_HINT) {
    return details.hint;
  }
  switch (idpError) {
    case "invalid_client":
      return invalidClientHint(upstream);
    case "invalid_dpop_proof":
      return "the token endpoint refused the DPoP proof: check that it accepts dpop.algorithm (its dpop_signing_alg_values_supported) and that this host's clock is right (the proof's iat)";
    case "use_dpop_nonce":
      return "the token endpoint asked for a DPoP nonce again after the retry with its nonce: it may rotate nonces faster than a request takes, or answer each replica from another nonce store";
    case "unauthorized_client":
      return "the token endpoint says unauthorized_client: this client may not use the client_credentials grant";
    case "invalid_scope":
      return "the token endpoint says invalid_scope: check token.scope";
    case "invalid_request":
      return "the token endpoint did not accept the request: check token.format (form or json) and extra parameters";
    case "unsupported_grant_type":
      return "the token endpoint does not support client_credentials at this URL: check the token path";
  }
  switch (error.code) {
    case "BP_ERR_SECRET_FILE":
      return "check that the clientId/clientSecret files exist, are readable and not empty";
    case "BP_ERR_TOKEN_TIMEOUT":
      return `no answer within ${upstream.tokenPolicy.requestTimeoutMs} ms: the endpoint is slow or traffic is dropped (setting token.timeout)`;
    case "BP_ERR_TOKEN_REDIRECT":
      return "the token URL redirects; configure the final URL (redirects are never followed with credentials)";
    case "BP_ERR_TOKEN_RESPONSE_INVALID":
      if (details.expectedTokenType === "DPoP") {
        return "the provider issued an unbound token: enable DPoP-bound access tokens for this client there (docs/identity-providers.md), or remove upstreams[].dpop";
      }
      if (typeof details.tokenType === "string" && details.tokenType.toLowerCase() === "dpop") {
        return "the provider issues DPoP-bound tokens to this client: set upstreams[].dpop ({} for a key per process, or a keyFile shared by the replicas)";
      }
      return "the answer is not an OAuth token response: is the token URL (apiVersion / token path) right?";
    case "BP_ERR_TOKEN_NETWORK":
      return "the request did not get through: see the DNS/TCP/TLS steps above";
  }
  if (status === 404) {
    return `no token endpoint at ${describeTokenUrl(upstream.token.tokenUrl)}: check apiVersion (default uses /iam/v1/oauth2/token, scripting-preview /oauth2/token)`;
  }
  if (status === 401 || status === 403)
    return invalidClientHint(upstream).replace(/^[^:]*: /, "the credentials were refused: ");
  if (status !== undefined && status >= 500)
    return "the token endpoint failed on its side: try again later or ask its operators";
  return undefined;
}

const DPOP_KEY_HINT =
  "dpop.keyFile must be a readable, unencrypted PEM private key: EC P-256 (ES256), RSA ≥ 2048 bits (RS256, PS256) or Ed25519 (EdDSA), matching dpop.algorithm when set";

function isDpopKeyError(error: unknown): boolean {
  return error instanceof BearerProxyError && error.code === "BP_ERR_DPOP_KEY";
}

/** Failures of the client-auth step itself, before anything was sent. */
function isClientAuthError(error: unknown): boolean {
  return (
    error instanceof BearerProxyError &&
    (error.code === "BP_ERR_CLIENT_KEY" || error.code === "BP_ERR_CLIENT_ASSERTION")
  );
}

function clientAuthHint(error: unknown): string | undefined {
  if (!(error instanceof BearerProxyError)) return undefined;
  if (error.code === "BP_ERR_CLIENT_KEY") {
    return "clientKeyFile must be an unencrypted PEM private key (RSA ≥ 2048 bits, EC P-256 or Ed25519) and clientCertificateFile its certificate";
  }
  return "whoever issues the assertion rotates the file (the kubelet for a projected service-account token): check the volume mount, its path and expirationSeconds";
}

/** What invalid_client most likely means for the configured method. */
function invalidClientHint(upstream: UpstreamConfig): string {
  const prefix = "the token endpoint says invalid_client: ";
  switch (upstream.token.clientAuth) {
    case "body":
      return `${prefix}check clientId / clientSecret (and clientAuth: body or basic)`;
    case "basic":
      return `${prefix}check clientId / clientSecret (and clientAuth: body or basic, basicEncoding: form or raw)`;
    case "private-key-jwt":
      return `${prefix}check that the IdP has the public key of clientKeyFile registered for this client id (with the kid / certificate thumbprint it expects) and that it accepts the assertion's aud (assertion.audience, default the token URL)`;
    case "client-assertion-file":
      return `${prefix}check the federated credential registered at the IdP: issuer, subject and audience of the assertion must match it exactly`;
    case "tls-client-auth":
      return `${prefix}check that the IdP has this client certificate (subject or thumbprint) registered for the client id, and that this token URL asks for client certificates (often a separate mTLS host)`;
  }
}
