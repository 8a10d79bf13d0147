import { Agent } from "undici";
import type {
  Emulator,
  EmulatorClient,
  TokenFaultHandler,
} from "../../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../../helpers/app-under-test.js";
import { startTlsEmulator } from "../../helpers/emulator.js";
import type { TestPki } from "../../helpers/tls.js";
import { startTokenTap, type TokenTap } from "./token-tap.js";
import { type Answer, type LoadOptions, runLoad, send } from "./traffic.js";

/**
 * One self-contained world per test: its own emulator (so tests can run concurrently and each
 * script its own token endpoint), optionally a token tap in front of it, and the real app with
 * one upstream `api` on "/" pointing at the emulator.
 */

export interface ScenarioOptions {
  pki: TestPki;
  /** Installed before the app starts, so the prefetch already meets it. */
  fault?: TokenFaultHandler;
  /** The upstream's `token:` settings. */
  token?: Record<string, unknown>;
  /** Emulator token lifetime in seconds (`expires_in` is one less). Default 600. */
  lifetimeSeconds?: number;
  /** Route token requests through a tap (to rewrite answers or see every token issued). */
  tap?: boolean;
  /** Adjust the tap before the app starts. */
  configureTap?: (tap: TokenTap) => void;
  /** Client credentials; default the emulator's demo client. */
  client?: EmulatorClient;
  /** Extra fields for the `api` upstream. */
  upstream?: Record<string, unknown>;
  logLevel?: string;
}

export interface Scenario {
  emulator: Emulator;
  tap: TokenTap | undefined;
  aut: AppUnderTest;
  /** Keep-alive client to the proxy. */
  agent: Agent;
  /** Proxy URL of `path`. */
  url(path: string): string;
  /** One request to `path` through the proxy, on `agent`. */
  send(path: string): Promise<Answer>;
  /** Constant load on `path` through the proxy, on `agent` (see `runLoad`). */
  load(path: string, options: Omit<LoadOptions, "urls" | "dispatcher">): Promise<Answer[]>;
  close(): Promise<void>;
}

/** Run `body` in a fresh scenario, closed afterwards whatever happens. */
export async function withScenario<T>(
  options: ScenarioOptions,
  body: (scenario: Scenario) => Promise<T>,
): Promise<T> {
  const scenario = await startScenario(options);
  try {
    return await body(scenario);
  } finally {
    await scenario.close();
  }
}

/**
 * Many cases in one world: case `i` of `prefix` is client `<prefix>-<i>` (secret `secret-<i>`)
 * and upstream `<prefix>-<i>` on the path prefix `/<prefix>-<i>/`, so one emulator and one app
 * serve them all and a fault handler can answer each client its own way.
 */
export function caseClient(prefix: string, i: number): EmulatorClient {
  return { clientId: `${prefix}-${i}`, clientSecret: `secret-${i}` };
}

/** The upstream of case `i` (see `caseClient`), with `fields` such as baseUrl and token. */
export function caseUpstream(
  prefix: string,
  i: number,
  fields: Record<string, unknown>,
): Record<string, unknown> {
  return {
    name: `${prefix}-${i}`,
    ...caseClient(prefix, i),
    match: { pathPrefix: `/${prefix}-${i}/` },
    stripPrefix: true,
    ...fields,
  };
}

export async function startScenario(options: ScenarioOptions): Promise<Scenario> {
  const client = options.client ?? { clientId: "demo-client", clientSecret: "demo-secret" };
  const emulator = await startTlsEmulator(options.pki, {
    clients: [client],
    tokenLifetimeSeconds: options.lifetimeSeconds ?? 600,
  });
  const cleanups: (() => Promise<void>)[] = [() => emulator.close()];
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      for (const cleanup of [...cleanups].reverse()) await cleanup().catch(() => {});
    })();
    return closing;
  };
  try {
    if (options.fault) emulator.setTokenFault(options.fault);
    let tap: TokenTap | undefined;
    if (options.tap || options.configureTap) {
      tap = await startTokenTap({
        target: emulator.url,
        caPem: options.pki.caPem,
        cert: options.pki.good,
      });
      cleanups.push(() => tap!.close());
      options.configureTap?.(tap);
    }
    const aut = await startAppUnderTest({
      caPem: options.pki.caPem,
      logLevel: options.logLevel ?? "info",
      config: {
        upstreams: [
          {
            name: "api",
            baseUrl: emulator.url,
            ...(tap ? { tokenUrl: tap.tokenUrl } : {}),
            clientId: client.clientId,
            clientSecret: client.clientSecret,
            token: options.token ?? {},
            ...options.upstream,
          },
        ],
      },
    });
    cleanups.push(() => aut.close());
    const agent = new Agent({ connections: 8 });
    cleanups.push(() => agent.close());
    const url = (path: string) => `${aut.url}${path}`;
    return {
      emulator,
      tap,
      aut,
      agent,
      url,
      send: (path) => send(url(path), { dispatcher: agent }),
      load: (path, load) => runLoad({ ...load, urls: [url(path)], dispatcher: agent }),
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}
