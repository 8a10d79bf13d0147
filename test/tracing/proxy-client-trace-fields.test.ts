/**
 * Issue #25: with tracing on, the trace context the upstream receives is the proxy's — one
 * `traceparent` naming the attempt, and the `tracestate` of that trace — never a field the
 * client sent beside it. W3C Trace Context §3.3.1/§3.5: a `tracestate` is only meaningful with
 * the `traceparent` it came with; when that one is invalid both are discarded.
 * The header injector leaves the client's fields out when tracing is on (they once went up
 * beside ours: a stale tracestate, a second traceparent).
 */
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EchoResponse, Emulator } from "../../src/emulator/index.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { createTestPki } from "../helpers/tls.js";
import { echoedHeaders, startTracedProxy, type TracedProxy } from "./proxy-fixture.js";
import { parseTraceparent } from "./tracing-fixture.js";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const VALID = `00-${TRACE}-00f067aa0ba902b7-01`;

describe("the client's trace fields with tracing on", () => {
  let emulator: Emulator;
  let proxy: TracedProxy;

  beforeAll(async () => {
    const pki = await createTestPki();
    emulator = await startTlsEmulator(pki);
    proxy = await startTracedProxy({
      caPem: pki.caPem,
      upstreams: [{ name: "sheets", baseUrl: emulator.url }],
    });
  });
  afterAll(async () => {
    await proxy.close();
    await emulator.close();
  });

  /** What the upstream got for `rawHeaders` (flat name/value list, duplicates kept). */
  const forward = async (rawHeaders: string[]) => {
    const response = await request(`${proxy.url}/echo/fields`, { headers: rawHeaders });
    const echo = (await response.body.json()) as EchoResponse;
    return {
      traceparent: echoedHeaders(echo, "traceparent"),
      tracestate: echoedHeaders(echo, "tracestate"),
    };
  };

  it("replaces the client's traceparent whatever its case, keeping its tracestate", async () => {
    const sent = await forward(["TraceParent", VALID, "TraceState", "vendor=abc"]);
    expect(sent.traceparent).toHaveLength(1);
    expect(parseTraceparent(sent.traceparent[0]).traceId).toBe(TRACE);
    expect(sent.traceparent[0]).not.toBe(VALID);
    expect(sent.tracestate).toEqual(["vendor=abc"]);
  });

  it("drops the tracestate of an invalid traceparent (a new trace has none)", async () => {
    const sent = await forward(["traceparent", "00-not-a-trace-01", "tracestate", "vendor=stale"]);
    expect(sent.traceparent).toHaveLength(1);
    expect(sent.tracestate).toEqual([]);
  });

  it("sends one traceparent when the client sent two", async () => {
    const sent = await forward([
      "traceparent",
      VALID,
      "traceparent",
      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    ]);
    expect(sent.traceparent).toHaveLength(1);
    expect(sent.traceparent[0]).not.toBe(VALID);
  });

  it("sends one tracestate when the client split it over two fields", async () => {
    const sent = await forward(["traceparent", VALID, "tracestate", "a=1", "tracestate", "b=2"]);
    // RFC 9110 §5.3: the two fields are one list; the proxy's is the combined one.
    expect(sent.tracestate).toEqual(["a=1,b=2"]);
  });
});
