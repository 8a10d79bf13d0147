/**
 * `bearer-proxy token [--upstream NAME]`: fetch one fresh access token and print it, alone, on
 * stdout, so scripts can do `TOKEN=$(bearer-proxy token)`. Diagnostics go to stderr and never
 * contain the secret or the token (nor, with `dpop`, the private key or a proof: only the key's
 * thumbprint and algorithm). Also home of the small helpers `check` shares.
 */
import type { ProxyConfig, UpstreamConfig } from "../config/proxy-config.js";
import { BearerProxyError, errorMessage } from "../errors.js";
import { createDispatcher } from "../net/dispatcher.js";
import { requestToken, type TokenResponse } from "../token/client-credentials.js";
import type { Dpop } from "../token/dpop/index.js";
import { createLazyDpop } from "../token/dpop/lazy-dpop.js";
import { createCredentialReader } from "../token/secret-reader.js";

export interface TokenArgs {
  config: ProxyConfig;
  /** Upstream name; may be omitted when the config has exactly one. */
  upstream?: string | undefined;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

/** Print a fresh token for one upstream; resolves with the exit code (0 ok, 1 failure). */
export async function runToken(args: TokenArgs): Promise<number> {
  const chosen = selectUpstreams(args.config, args.upstream, { all: false });
  if (!chosen.ok) {
    args.stderr.write(`bearer-proxy token: ${chosen.message}\n`);
    return 1;
  }
  const upstream = chosen.upstreams[0]!;
  const result = await fetchToken(args.config, upstream);
  result.dpop?.close();
  if (!result.ok) {
    args.stderr.write(`bearer-proxy token: upstream ${upstream.name}: ${result.message}\n`);
    // A provider that does not answer RFC 6749 errors (Apigee, Twitch, Graph, reddit) is only
    // diagnosable by what it said; this is the first command run with a bad secret.
    if (result.excerpt !== undefined) {
      args.stderr.write(`bearer-proxy token: upstream ${upstream.name}: body: ${result.excerpt}\n`);
    }
    return 1;
  }
  if (result.dpop)
    args.stderr.write(`bearer-proxy token: upstream ${upstream.name}: ${dpopNote(result.dpop)}\n`);
  args.stdout.write(`${result.token.accessToken}\n`);
  return 0;
}

/** What a DPoP-bound token needs to be used, by whom (the key's public facts only). */
function dpopNote(dpop: Dpop): string {
  const bound = `a DPoP-bound token (key ${dpop.algorithm}, jkt ${dpop.jkt}): send it as "Authorization: DPoP <token>" with a DPoP proof signed by that key (RFC 9449)`;
  return dpop.key.ephemeral
    ? `${bound}; the key was ephemeral and is gone, so the token is of no use outside this command (set dpop.keyFile to sign with a key you hold)`
    : bound;
}

export type UpstreamSelection =
  | { ok: true; upstreams: UpstreamConfig[] }
  | { ok: false; message: string };

/**
 * The upstream(s) a command works on: the named one, or without a name every upstream (`all`)
 * or the only one.
 */
export function selectUpstreams(
  config: ProxyConfig,
  name: string | undefined,
  options: { all: boolean },
): UpstreamSelection {
  const names = config.upstreams.map((u) => u.name);
  if (name !== undefined) {
    const found = config.upstreams.find((u) => u.name === name);
    if (found) return { ok: true, upstreams: [found] };
    return { ok: false, message: `no upstream named "${name}"; configured: ${names.join(", ")}` };
  }
  if (config.upstreams.length === 0) return { ok: false, message: "no upstreams configured" };
  if (options.all || config.upstreams.length === 1)
    return { ok: true, upstreams: [...config.upstreams] };
  return {
    ok: false,
    message: `several upstreams are configured; choose one with --upstream NAME: ${names.join(", ")}`,
  };
}

export type TokenFetchResult = (
  | { ok: true; token: TokenResponse; durationMs: number }
  | {
      ok: false;
      error: unknown;
      message: string;
      /** What the endpoint answered when it was no RFC 6749 error, scrubbed (error-excerpt.ts). */
      excerpt?: string | undefined;
      durationMs: number;
    }
) & {
  /** How the client authenticated (secret-free; empty when it failed before that). */
  clientAuthFacts: readonly string[];
  /**
   * The DPoP key the request proved possession of (`dpop` set and the key loaded): the caller
   * uses it for further requests with the token, and closes it.
   */
  dpop?: Dpop | undefined;
};

/**
 * Read the upstream's credentials and ask its token endpoint once, on a dispatcher of its own
 * with the same TLS settings the proxy uses. Failure messages are secret-free.
 */
export async function fetchToken(
  config: ProxyConfig,
  upstream: UpstreamConfig,
): Promise<TokenFetchResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const reader = createCredentialReader(upstream.token, { pollIntervalMs: 0 });
  let secret: string | undefined;
  let clientAuthFacts: readonly string[] = [];
  let dispatcher: ReturnType<typeof createDispatcher> | undefined;
  let dpop: Dpop | undefined;
  try {
    const credentials = await reader.read();
    secret = credentials.clientSecret;
    if (upstream.token.dpop) {
      dpop = await createLazyDpop(upstream.token.dpop, { pollIntervalMs: 0 }).get();
    }
    const timeoutMs = upstream.tokenPolicy.requestTimeoutMs;
    dispatcher = createDispatcher({
      tls: upstream.token.tls,
      connections: 1,
      connectTimeoutMs: upstream.timeouts.connectMs,
      headersTimeoutMs: timeoutMs,
      bodyTimeoutMs: timeoutMs,
      idleConnectionMs: upstream.timeouts.idleConnectionMs,
      egressProxy: config.egressProxy,
    });
    const token = await requestToken(upstream.token, credentials, {
      dispatcher,
      timeoutMs,
      onClientAuth: (facts) => {
        clientAuthFacts = facts;
      },
      dpop,
    });
    return { ok: true, token, durationMs: elapsed(), clientAuthFacts, dpop };
  } catch (error) {
    const message = safeMessage(error, secret);
    const excerpt = bodyExcerptOf(error, secret);
    return { ok: false, error, message, excerpt, durationMs: elapsed(), clientAuthFacts, dpop };
  } finally {
    reader.close();
    await dispatcher?.close().catch(() => {});
  }
}

/** An error's message with the secret cut out (our errors never hold one; others might). */
export function safeMessage(error: unknown, secret: string | undefined): string {
  const text = errorMessage(error);
  return secret && secret.length > 0 ? text.split(secret).join("[redacted]") : text;
}

/**
 * The excerpt of a non-RFC 6749 error body the token engine attached (`details.bodyExcerpt`, the
 * one /status shows), if the failure carries one. It is scrubbed already; the secret is cut once
 * more so a change there cannot make a command print it.
 */
function bodyExcerptOf(error: unknown, secret: string | undefined): string | undefined {
  if (!(error instanceof BearerProxyError)) return undefined;
  const excerpt = error.details?.bodyExcerpt;
  return typeof excerpt === "string" ? safeMessage(excerpt, secret) : undefined;
}
