import { afterAll, beforeAll, expect } from "vitest";
import { JWKS_RETRY_AFTER_FAILURE_MS } from "../../../src/callers/jwks-timing.js";
import type { Emulator } from "../../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../../helpers/app-under-test.js";
import {
  adminPages,
  emulatorUpstream,
  expectNoSecrets,
  type HttpAnswer,
  httpGet,
  KUBERNETES_ISSUER,
  type ServiceAccountJwtOptions,
  type ServiceAccountPrivateKey,
  serviceAccountJwt,
} from "../../helpers/callers-fixture.js";
import { startTlsEmulator } from "../../helpers/emulator.js";
import { createTestPki } from "../../helpers/tls.js";
import { type JwksServer, startJwksServer } from "./jwks-server.js";

/** The one service account the `billing` upstream admits. */
export const BILLING_CLIENT = "system:serviceaccount:payments:billing-client";

/** The config document of {@link useServiceAccountGateway}. */
export type ServiceAccountDocument = {
  callers: { kubernetes: Record<string, unknown> };
  upstreams: Record<string, unknown>[];
};

export interface ServiceAccountGatewayBench {
  emulator: Emulator;
  jwks: JwksServer;
  gateway: AppUnderTest;
  /** The document the gateway started with, `kubernetes` added to `callers.kubernetes`. */
  document(kubernetes?: Record<string, unknown>): ServiceAccountDocument;
  /** Every caller token minted by `token`, in order. */
  tokens: string[];
  /** Every answer `get` received, in order. */
  answers: HttpAnswer[];
  /** A JWT for {@link BILLING_CLIENT} (unless `options.subject`), kept in `tokens`. */
  token(
    key: ServiceAccountPrivateKey,
    options?: Partial<ServiceAccountJwtOptions>,
  ): Promise<string>;
  /** GET /billing/echo with `Proxy-Authorization: Bearer <jwt>` from `localAddress`, kept. */
  get(jwt: string, localAddress?: string): Promise<HttpAnswer>;
  /** Neither a caller token nor any of `secrets` in the logs, the answers, /status or /metrics. */
  expectNothingLeaked(secrets?: readonly string[]): Promise<void>;
}

/**
 * Before the file's tests, a gateway whose `billing` upstream (the TLS emulator) admits
 * {@link BILLING_CLIENT} only, verifying service-account tokens with the keys of a
 * {@link JwksServer} reached over real TLS and trusted through `caFile` (`cluster-ca.pem`, a CA
 * of its own, unknown to the upstreams); closed after them. `kubernetes` adds to
 * `callers.kubernetes`, `files` to the gateway's folder. The server publishes nothing and needs
 * no token until a test says so; nothing is fetched before the first caller.
 */
export function useServiceAccountGateway(
  options: { kubernetes?: Record<string, unknown>; files?: Record<string, string> } = {},
): ServiceAccountGatewayBench {
  const bench: ServiceAccountGatewayBench = {
    emulator: undefined as unknown as Emulator,
    jwks: undefined as unknown as JwksServer,
    gateway: undefined as unknown as AppUnderTest,
    document: (kubernetes = {}) => ({
      callers: {
        kubernetes: {
          issuer: KUBERNETES_ISSUER,
          jwksUri: bench.jwks.uri,
          caFile: "cluster-ca.pem",
          ...kubernetes,
        },
      },
      upstreams: [
        emulatorUpstream(bench.emulator.url, "billing", {
          allow: [{ serviceAccount: "payments/billing-client" }],
        }),
      ],
    }),
    tokens: [],
    answers: [],
    async token(key, jwtOptions = {}) {
      const jwt = await serviceAccountJwt(key, { subject: BILLING_CLIENT, ...jwtOptions });
      bench.tokens.push(jwt);
      return jwt;
    },
    async get(jwt, localAddress = "127.0.0.1") {
      const answer = await httpGet(`${bench.gateway.url}/billing/echo`, {
        localAddress,
        headers: { "proxy-authorization": `Bearer ${jwt}` },
      });
      bench.answers.push(answer);
      return answer;
    },
    async expectNothingLeaked(secrets = []) {
      expectNoSecrets(
        {
          logs: bench.gateway.lines,
          bodies: bench.answers.map((a) => a.text),
          ...(await adminPages(bench.gateway.adminUrl)),
        },
        [...secrets, ...bench.tokens],
      );
    },
  };
  beforeAll(async () => {
    const upstreamPki = await createTestPki();
    [bench.emulator, bench.jwks] = await Promise.all([
      startTlsEmulator(upstreamPki),
      startJwksServer(),
    ]);
    bench.gateway = await startAppUnderTest({
      caPem: upstreamPki.caPem,
      files: { "cluster-ca.pem": bench.jwks.caPem, ...options.files },
      config: bench.document(options.kubernetes),
    });
  });
  afterAll(async () => {
    await bench.gateway?.close();
    await Promise.all([bench.emulator?.close(), bench.jwks?.close()]);
  });
  return bench;
}

/**
 * `answer` is the gateway's 503 `caller_keys_unavailable` for upstream `billing` with `message`:
 * the backoff as Retry-After, no challenge (a new credential would not help), the JSON error.
 */
export function expectKeysUnavailable(answer: HttpAnswer, message: string): void {
  expect(answer.status, answer.text).toBe(503);
  expect(answer.headers["bearer-proxy-error"]).toBe("caller_keys_unavailable");
  expect(answer.headers["retry-after"]).toBe(String(JWKS_RETRY_AFTER_FAILURE_MS / 1000));
  expect(answer.headers["proxy-authenticate"]).toBeUndefined();
  expect(JSON.parse(answer.text)).toEqual({
    error: { code: "caller_keys_unavailable", message, upstream: "billing" },
  });
}
