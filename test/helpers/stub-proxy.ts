/**
 * The smallest whole proxy a request-level test needs: one fake HTTPS upstream and the proxy in
 * front of it, its only upstream `u` on "/" with stub tokens (no token endpoint), for the
 * enclosing describe block. For tests about what the proxy does with the bytes a client sends.
 */
import { startTestProxy, type TestProxy } from "../proxy/harness.js";
import { createStubTokens } from "../proxy/stub-tokens.js";
import { type FakeUpstream, startFakeUpstream } from "./fake-upstreams.js";
import { createTestPki } from "./tls.js";
import { useResource } from "./use-resource.js";

export interface StubProxyOptions {
  /** Fields of upstream `u` besides its name and baseUrl (timeouts, replayBodyLimit, …). */
  upstream?: Record<string, unknown>;
  /** Top-level config fields besides `upstreams` (limits, …). */
  config?: Record<string, unknown>;
  logLevel?: string;
}

/** Getters for the running pair; they throw outside tests. */
export interface StubProxy {
  readonly upstream: FakeUpstream;
  readonly proxy: TestProxy;
}

/** Start the pair before the describe block's tests and close it after them. */
export function useStubProxy(options: StubProxyOptions = {}): StubProxy {
  const running = useResource(
    "useStubProxy: the proxy",
    async () => {
      const pki = await createTestPki();
      const upstream = await startFakeUpstream({ cert: pki.good });
      try {
        const proxy = await startTestProxy({
          caPem: pki.caPem,
          tokens: { u: createStubTokens() },
          ...(options.logLevel ? { logLevel: options.logLevel } : {}),
          config: {
            ...options.config,
            upstreams: [{ name: "u", baseUrl: upstream.origin, ...options.upstream }],
          },
        });
        return { upstream, proxy };
      } catch (error) {
        await upstream.close();
        throw error;
      }
    },
    async ({ upstream, proxy }) => {
      await proxy.close();
      await upstream.close();
    },
  );
  return {
    get upstream() {
      return running().upstream;
    },
    get proxy() {
      return running().proxy;
    },
  };
}
