import type { TokenEndpointSpec, TokenPolicy } from "../../src/config/proxy-config.js";
import { BearerProxyError } from "../../src/errors.js";
import type { ClientCredentials, TokenResponse } from "../../src/token/client-credentials.js";
import type { CredentialReader } from "../../src/token/secret-reader.js";
import type { TokenProvider } from "../../src/token/token-provider.js";
import { createTokenSource, type TokenSourceOptions } from "../../src/token/token-source.js";
import { FakeClock } from "../helpers/fake-clock.js";
import { captureLogs, DEFAULT_POLICY, makeSpec, seededRandom } from "./helpers.js";

export interface FakeCall {
  credentials: ClientCredentials;
  signal: AbortSignal;
  atMs: number;
}

export type FakeAnswer = TokenResponse | BearerProxyError | "hang";

/**
 * A token endpoint on the fake clock: answers after `latencyMs` of fake time with whatever
 * `answer` returns (default: a fresh 600 s token), or never ("hang", until aborted).
 */
export class FakeTokenEndpoint {
  readonly calls: FakeCall[] = [];
  latencyMs = 0;
  issued = 0;
  answer: (call: FakeCall) => FakeAnswer = () => this.token(600);

  constructor(private readonly clock: FakeClock) {}

  token(expiresInSeconds: number | undefined, scope = "files:read"): TokenResponse {
    this.issued++;
    return { accessToken: `tok-${this.issued}`, expiresInSeconds, scope, expiresInClamped: false };
  }

  readonly fetchToken = (
    credentials: ClientCredentials,
    signal: AbortSignal,
  ): Promise<TokenResponse> => {
    const call = { credentials, signal, atMs: this.clock.now() };
    this.calls.push(call);
    return new Promise((resolve, reject) => {
      signal.addEventListener("abort", () => reject(signal.reason), { once: true });
      const deliver = () => {
        const result = this.answer(call);
        if (result === "hang") return;
        if (result instanceof Error) reject(result);
        else resolve(result);
      };
      if (this.latencyMs > 0) this.clock.setTimeout(deliver, this.latencyMs);
      else deliver();
    });
  };
}

export function unavailable(status = 503, retryAfterSeconds?: number): BearerProxyError {
  return new BearerProxyError(
    "BP_ERR_TOKEN_HTTP",
    `token endpoint https://idp.test/iam/v1/oauth2/token answered ${status} (content type text/html)`,
    {
      ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
      details: { status },
    },
  );
}

export function invalidClient(): BearerProxyError {
  return new BearerProxyError(
    "BP_ERR_TOKEN_REJECTED",
    "token endpoint https://idp.test/iam/v1/oauth2/token answered 401 (invalid_client: client authentication failed)",
    {
      details: {
        status: 401,
        idpError: "invalid_client",
        idpErrorDescription: "client authentication failed",
      },
    },
  );
}

export interface SourceHarness {
  clock: FakeClock;
  endpoint: FakeTokenEndpoint;
  source: TokenProvider;
  logs: ReturnType<typeof captureLogs>;
}

export function makeSource(
  options: {
    policy?: Partial<TokenPolicy>;
    spec?: Partial<TokenEndpointSpec>;
    random?: () => number;
    credentialReader?: CredentialReader;
    clock?: FakeClock;
    extra?: Partial<TokenSourceOptions>;
  } = {},
): SourceHarness {
  const clock = options.clock ?? new FakeClock();
  const endpoint = new FakeTokenEndpoint(clock);
  const logs = captureLogs();
  const source = createTokenSource({
    upstream: "files-api",
    spec: makeSpec(options.spec),
    policy: { ...DEFAULT_POLICY, ...options.policy },
    clock,
    logger: logs.logger,
    random: options.random ?? seededRandom(1),
    fetchToken: endpoint.fetchToken,
    ...(options.credentialReader ? { credentialReader: options.credentialReader } : {}),
    ...options.extra,
  });
  return { clock, endpoint, source, logs };
}

/** Settle a promise into a result the test can inspect without awaiting it to completion. */
export function track<T>(promise: Promise<T>): { done: boolean; value?: T; error?: unknown } {
  const state: { done: boolean; value?: T; error?: unknown } = { done: false };
  promise.then(
    (value) => Object.assign(state, { done: true, value }),
    (error: unknown) => Object.assign(state, { done: true, error }),
  );
  return state;
}
