import { it } from "vitest";
import { startFakeUpstream } from "../helpers/fake-upstreams.js";
import { rawRequest } from "../helpers/raw-http.js";
import { createTestPki } from "../helpers/tls.js";
import { startTestProxy } from "./harness.js";
import { createStubTokens } from "./stub-tokens.js";

it("dump", async () => {
  const pki = await createTestPki();
  const upstream = await startFakeUpstream({ cert: pki.good });
  const proxy = await startTestProxy({
    caPem: pki.caPem,
    tokens: { p: createStubTokens() },
    config: { upstreams: [{ name: "p", baseUrl: upstream.origin }] },
  });
  for (const t of ["/echo/a", "/echo/b", "/x", "/y", "/echo/c"]) {
    const t0 = performance.now();
    const ex = await rawRequest(
      proxy.port,
      `GET ${t} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n`,
    );
    console.log(t, ex.responses[0]?.status, ex.closed, performance.now() - t0);
  }
  for (const t of ["/echo/a", "/x"]) {
    const t0 = performance.now();
    const ex = await rawRequest(proxy.port, `GET ${t} HTTP/1.1\r\nHost: h\r\n\r\n`, {
      timeoutMs: 300,
    });
    console.log(t, ex.responses[0]?.status, ex.closed, performance.now() - t0);
  }
  console.log(upstream.tlsHandshakes());
  await proxy.close();
  await upstream.close();
});
