import { createTestPki, type ServerCertificate } from "../../helpers/tls.js";
import { startTestProxy, type TestProxy } from "../../proxy/harness.js";
import { createStubTokens } from "../../proxy/stub-tokens.js";
import {
  type RawTlsUpstream,
  type RawUpstreamRequest,
  startRawTlsUpstream,
} from "./raw-tls-upstream.js";

/** A raw TLS upstream (see raw-tls-upstream.ts) behind a real proxy with a stub token. */
export interface ProxiedRawUpstream {
  upstream: RawTlsUpstream;
  proxy: TestProxy;
  close(): Promise<void>;
}

export async function startProxiedRawUpstream(
  onRequest: (request: RawUpstreamRequest) => void | Promise<void>,
  upstreamConfig: Record<string, unknown> = {},
): Promise<ProxiedRawUpstream> {
  const pki = await createTestPki();
  const cert: ServerCertificate = pki.good;
  const upstream = await startRawTlsUpstream({ cert, onRequest });
  const proxy = await startTestProxy({
    caPem: pki.caPem,
    tokens: { u: createStubTokens() },
    logLevel: "warn",
    config: { upstreams: [{ name: "u", baseUrl: upstream.origin, ...upstreamConfig }] },
  });
  return {
    upstream,
    proxy,
    async close() {
      await proxy.close();
      await upstream.close();
    },
  };
}
