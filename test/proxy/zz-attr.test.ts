import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { Agent, request } from "undici";
import { it } from "vitest";
import { startFakeUpstream } from "../helpers/fake-upstreams.js";
import { createTestPki } from "../helpers/tls.js";
import { startTestProxy } from "./harness.js";
import { createStubTokens } from "./stub-tokens.js";
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;
const MIB = 1024 * 1024;
function pattern(total: number) {
  const chunk = Buffer.alloc(64 * 1024, 3);
  let sent = 0;
  return new Readable({ read() { if (sent >= total) { this.push(null); return; } const n = Math.min(chunk.length, total - sent); sent += n; this.push(chunk.subarray(0, n)); } });
}
it("attr", async () => {
  const pki = await createTestPki();
  const upstream = await startFakeUpstream({ cert: pki.good });
  const proxy = await startTestProxy({ caPem: pki.caPem, tokens: { u: createStubTokens() }, logLevel: "warn", config: { upstreams: [{ name: "u", baseUrl: upstream.origin }] } });
  const viaProxy = new Agent();
  const direct = new Agent({ connect: { ca: pki.caPem } });
  for (const [name, url, d] of [["direct", upstream.origin, direct], ["proxy", proxy.url, viaProxy], ["direct", upstream.origin, direct], ["proxy", proxy.url, viaProxy]] as const) {
    gc();
    const live = () => { const m = process.memoryUsage(); return m.heapUsed + m.external + m.arrayBuffers; };
    const base = live(); let peak = base; let samples = 0;
    const t = setInterval(() => { gc(); peak = Math.max(peak, live()); samples++; }, 100);
    const res = await request(`${url}/echo/up`, { method: "PUT", body: pattern(30 * MIB), headers: { "content-length": String(30 * MIB) }, dispatcher: d });
    const body = await res.body.json() as { bodyLength: number };
    clearInterval(t);
    console.log(name, body.bodyLength, "peak live +", ((peak - base) / MIB).toFixed(1), "MiB", samples);
  }
  await proxy.close(); await upstream.close(); await viaProxy.close(); await direct.close();
}, 120000);
