/**
 * What the DPoP token-side tests share: a token spec for the real authorization server
 * (test/helpers/dpop-authorization-server.ts, plain http on 127.0.0.1), a policy that lets a test
 * fetch again at once, the strings that must never appear in logs or status, and `useDpopBench`:
 * the real servers a file runs against, started once and closed after it.
 */
import { createPrivateKey } from "node:crypto";
import { readFile } from "node:fs/promises";
import { Agent } from "undici";
import { afterAll, beforeAll } from "vitest";
import type { DpopSpec, TokenEndpointSpec, TokenPolicy } from "../../src/config/proxy-config.js";
import {
  type DpopAuthorizationServer,
  type DpopAuthorizationServerOptions,
  startDpopAuthorizationServer,
} from "../helpers/dpop-authorization-server.js";
import { createDpopKeyDir, type DpopKeyDir } from "../helpers/dpop-keys.js";
import {
  type DpopResourceServer,
  type DpopResourceServerOptions,
  startDpopResourceServer,
} from "../helpers/dpop-resource-server.js";
import { DEFAULT_POLICY, makeTokenSpec } from "../helpers/upstream-config.js";

/** A refetch may follow at once: no min refresh interval, no min age before invalidation. */
export const IMMEDIATE_POLICY: TokenPolicy = Object.freeze({
  ...DEFAULT_POLICY,
  minRefreshIntervalMs: 0,
  minAgeBeforeInvalidateMs: 0,
});

/** The token spec of the AS's client (client_secret_post), with `dpop` when given. */
export function specFor(
  as: DpopAuthorizationServer,
  dpop?: Partial<DpopSpec> | undefined,
): TokenEndpointSpec {
  return makeTokenSpec(
    {
      tokenUrl: as.tokenUrl,
      allowInsecureHttp: true,
      clientId: as.clientId,
      clientSecret: as.clientSecret,
      scope: as.scope,
      ...(dpop === undefined ? {} : { dpop }),
    },
    {},
  );
}

/** The AS's answers to token requests, in order. */
export function tokenStatuses(as: DpopAuthorizationServer): number[] {
  return as.requests.filter((r) => r.path === "/token").map((r) => r.status);
}

/**
 * What of a PEM key file could leak: each line of its base64 body and the JWK private members
 * (`d`, and RSA's primes), in the forms a log line could carry them.
 */
export async function privateKeyForms(keyFile: string): Promise<string[]> {
  const pem = await readFile(keyFile, "utf8");
  const body = pem.split("\n").filter((line) => line.length > 0 && !line.startsWith("-----"));
  const jwk = createPrivateKey(pem).export({ format: "jwk" }) as Record<string, string>;
  const members = ["d", "p", "q", "dp", "dq", "qi"].flatMap((m) => (jwk[m] ? [jwk[m]] : []));
  return [...body, ...members];
}

/**
 * The first 20 characters every proof starts with: base64url of `{"typ":"dpop+jw` (15 bytes,
 * a whole number of base64 groups, so the encoding does not depend on what follows).
 */
export const PROOF_PREFIX = Buffer.from('{"typ":"dpop+jw').toString("base64url");

/** What `useDpopBench` starts; each field is set once its `beforeAll` has run. */
export interface DpopBench {
  as: DpopAuthorizationServer;
  /** Only with `rs`. */
  rs: DpopResourceServer;
  /** Only with `keys`. */
  keys: DpopKeyDir;
  /** A dispatcher trusting the resource server's CA (a plain Agent without `rs`). */
  agent: Agent;
}

/**
 * Start the authorization server (with `as` options), optionally a resource server that trusts
 * its tokens (`rs`: its options) and a key folder (`keys`), in `beforeAll`; close them all in
 * `afterAll`.
 */
export function useDpopBench(
  options: {
    as?: DpopAuthorizationServerOptions;
    rs?: Omit<DpopResourceServerOptions, "authorizationServer">;
    keys?: boolean;
  } = {},
): DpopBench {
  const bench = {} as DpopBench;
  beforeAll(async () => {
    bench.as = await startDpopAuthorizationServer(options.as);
    if (options.rs) {
      bench.rs = await startDpopResourceServer({
        authorizationServer: {
          jwksUrl: bench.as.jwksUrl,
          issuer: bench.as.issuer,
          audience: bench.as.resource,
        },
        ...options.rs,
      });
    }
    bench.agent = options.rs ? new Agent({ connect: { ca: bench.rs.caPem } }) : new Agent();
    if (options.keys) bench.keys = await createDpopKeyDir();
  });
  afterAll(async () => {
    await bench.agent?.close();
    await bench.rs?.close();
    await bench.as?.close();
    await bench.keys?.remove();
  });
  return bench;
}
