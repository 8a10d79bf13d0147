import { Agent } from "undici";
import { startEmulator } from "../../../src/emulator/emulator.js";
import type { Emulator, EmulatorClient, TokenFaultHandler } from "../../../src/emulator/types.js";
import { type AppUnderTest, startAppUnderTest } from "../../helpers/app-under-test.js";
import type { TestPki } from "../../helpers/tls.js";
import { startTokenTap, type TokenTap } from "./token-tap.js";

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
  close(): Promise<void>;
}

export async function startScenario(options: ScenarioOptions): Promise<Scenario> {
  const client = options.client ?? { clientId: "demo-client", clientSecret: "demo-secret" };
  const emulator = await startEmulator({
    host: "127.0.0.1",
    port: 0,
    tls: {
      certPem: options.pki.good.certPem,
      keyPem: options.pki.good.keyPem,
      caPem: options.pki.caPem,
    },
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
    return { emulator, tap, aut, agent, url: (path) => `${aut.url}${path}`, close };
  } catch (error) {
    await close();
    throw error;
  }
}
