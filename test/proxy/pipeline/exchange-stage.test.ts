/**
 * The exchange stage (src/proxy/pipeline/exchange-stage.ts): the last stage composes the
 * request's exchange from the layers its upstream and body call for and starts it — the relay
 * innermost (the client gets the upstream's answer), the retry layer always, the token replay
 * for a body that can be sent again or a DPoP token (whose nonces it keeps), the pacing layer
 * only with pacing; with tracing on, each attempt's span and traceparent beside the layers
 * (recorded or not, the answer's path is the same) — and, for an upgrade's way in, sends
 * the Upgrade through the upgrade dispatcher and hands a 101 to the tunnel. It passes nothing
 * on: the exchange ends the request.
 */
import { PassThrough, Readable } from "node:stream";
import { beforeAll, describe, expect, it } from "vitest";
import type { UpstreamConfig } from "../../../src/config/proxy-config.js";
import {
  ResponseRelay,
  type SwitchingProtocols,
} from "../../../src/proxy/exchange/response-relay.js";
import { ExchangeStage } from "../../../src/proxy/pipeline/exchange-stage.js";
import type { ProxiedRequest } from "../../../src/proxy/proxied-request.js";
import { createDpop, type Dpop } from "../../../src/token/dpop/index.js";
import { makeProxyConfig, makeUpstreamConfig } from "../../helpers/upstream-config.js";
import { createStubTokens } from "../stub-tokens.js";
import {
  codedError,
  flushPromises,
  makePacing,
  makeRoute,
  RecordingContext,
  RecordingFlow,
  type RecordingServerSpan,
  RecordingTracing,
  type RoutedRequestOptions,
  routedRequest,
  ScriptedDispatcher,
  ScriptedPacer,
  testToken,
} from "../support/pipeline-fakes.js";

const limits = makeProxyConfig([]).limits;
const plain = makeUpstreamConfig("api");
const paced = makeUpstreamConfig("paced", { rateLimit: { requests: 5, per: "1s" } });
/** Paced, and 503 is retried: only the pacing layer's Retry-After keeps the retry layer off it. */
const pacedRetrying503 = makeUpstreamConfig("paced", {
  rateLimit: { requests: 5, per: "1s" },
  retry: { attempts: 2, on: ["503", "reset"] },
});
const dpopConfig = makeUpstreamConfig("rs", { baseUrl: "https://rs.example.test", dpop: {} });

let dpop: Dpop;
beforeAll(async () => {
  dpop = await createDpop({ keyFile: undefined, algorithm: undefined });
});

async function run(
  config: UpstreamConfig,
  options: {
    tracing?: boolean;
    /** With tracing on: false when the sampler leaves the request out. */
    recorded?: boolean;
    request?: RoutedRequestOptions;
    onSwitchingProtocols?: (request: ProxiedRequest) => SwitchingProtocols;
    upgradeProtocols?: string;
  } = {},
) {
  const dispatcher = new ScriptedDispatcher("pooled");
  const fresh = new ScriptedDispatcher("fresh");
  const upgradeDispatcher = new ScriptedDispatcher("upgrade");
  const pacer = new ScriptedPacer();
  const tokens = createStubTokens();
  const token = options.request?.token ?? (await tokens.getToken());
  const route = makeRoute(config, {
    tokens,
    dispatcher,
    freshDispatcher: fresh,
    upgradeDispatcher,
    pacing: config.rateLimit === undefined ? undefined : makePacing(config, pacer),
    dropTraceContext: options.tracing,
  });
  const tracing = new RecordingTracing(options.recorded);
  const test = routedRequest(route, {
    ...options.request,
    token,
    ctx: new RecordingContext(tracing),
  });
  if (options.upgradeProtocols !== undefined)
    test.request.upgradeProtocols = options.upgradeProtocols;
  const flow = new RecordingFlow();
  new ExchangeStage(limits, options.tracing ?? false, options.onSwitchingProtocols).run(
    test.request,
    flow,
  );
  const server = tracing.servers[0] as RecordingServerSpan;
  return { test, flow, dispatcher, fresh, upgradeDispatcher, pacer, tokens, server };
}

describe("ExchangeStage", () => {
  it("is named exchange", () => {
    expect(new ExchangeStage(limits, false).name).toBe("exchange");
  });

  it("starts the exchange and relays the upstream's answer to the client; it passes nothing on", async () => {
    const r = await run(plain);
    expect(r.flow.passed).toEqual([]);
    expect(r.dispatcher.attempts).toHaveLength(1);
    expect(r.dispatcher.last.header("authorization")).toBe("Bearer stub-token-1");
    r.dispatcher.last.respond(200, { "content-type": "text/plain" }, "hello");
    const answer = r.test.answer();
    expect(answer.status).toBe(200);
    expect(answer.body).toBe("hello");
    expect(r.test.record()).toMatchObject({ status: 200, bytesOut: 5, attempts: 1 });
  });

  it("with tracing off: no client span, no traceparent of ours", async () => {
    const r = await run(plain, { tracing: false });
    expect(r.server.clients).toEqual([]);
    expect(r.dispatcher.last.header("traceparent")).toBeUndefined();
  });

  it("with tracing on: a client span per attempt, its traceparent sent, ended with the status", async () => {
    const r = await run(plain, { tracing: true });
    expect(r.server.clients).toHaveLength(1);
    expect(r.dispatcher.last.header("traceparent")).toBe(r.server.clients[0]!.traceparent());
    r.dispatcher.last.respond(204);
    expect(r.server.clients[0]!.ends).toEqual([
      { status: 204, errorCode: undefined, protocolVersion: "1.1" },
    ]);
  });

  it.each([
    ["left out by the sampler", false],
    ["recorded", true],
  ])(
    "a request %s: each attempt's traceparent sent, no layer in its answer's path",
    async (_, recorded) => {
      const r = await run(plain, {
        tracing: true,
        recorded,
        request: { method: "POST", body: Buffer.from("{}") },
      });
      // The answer goes from the exchange straight to the relay, as with tracing off.
      const layers = (r.test.request.exchange as unknown as { layers: { head: unknown } }).layers;
      expect(layers.head).toBeInstanceOf(ResponseRelay);
      expect(r.dispatcher.last.header("traceparent")).toBe(r.server.clients[0]!.traceparent());
      // The recoveries are still built when an answer needs them, and the resend gets its own.
      r.dispatcher.last.respond(401, { "www-authenticate": "Bearer" });
      await flushPromises();
      expect(r.dispatcher.attempts).toHaveLength(2);
      expect(r.server.clients.map((c) => c.resendCount)).toEqual([0, 1]);
      expect(r.dispatcher.last.header("traceparent")).toBe(r.server.clients[1]!.traceparent());
      r.dispatcher.last.respond(201, {}, "made");
      expect(r.test.answer().status).toBe(201);
      expect(r.test.record().attempts).toBe(2);
      // Each attempt's span ended with its own answer.
      expect(r.server.clients.map((c) => c.ends[0]?.status)).toEqual([401, 201]);

      const get = await run(plain, { tracing: true, recorded });
      get.dispatcher.last.fail(codedError("ECONNRESET"));
      expect(get.fresh.attempts).toHaveLength(1);
      expect(get.fresh.last.header("traceparent")).toBe(get.server.clients[1]!.traceparent());
      get.fresh.last.respond(200, {}, "ok");
      expect(get.test.record().attempts).toBe(2);
      expect(get.server.clients.map((c) => c.ends[0]?.status)).toEqual([0, 200]);
    },
  );

  it("retries a reset on a fresh connection (the retry layer is always there)", async () => {
    const r = await run(plain);
    r.dispatcher.last.fail(codedError("ECONNRESET"));
    expect(r.fresh.attempts).toHaveLength(1);
    r.fresh.last.respond(200, {}, "ok");
    expect(r.test.answer().status).toBe(200);
    expect(r.test.record().attempts).toBe(2);
  });

  it("replays a 401 for a body that can be sent again, with a span per attempt", async () => {
    const r = await run(plain, {
      tracing: true,
      request: { method: "POST", body: Buffer.from("{}") },
    });
    r.dispatcher.last.respond(401, { "www-authenticate": "Bearer" });
    await flushPromises();
    expect(r.dispatcher.attempts).toHaveLength(2);
    expect(r.dispatcher.last.header("authorization")).toBe("Bearer stub-token-2");
    r.dispatcher.last.respond(201, {}, "made");
    expect(r.test.answer().status).toBe(201);
    expect(r.test.record()).toMatchObject({ replayed: true, attempts: 2 });
    expect(r.server.clients.map((c) => c.resendCount)).toEqual([0, 1]);
  });

  it("relays a 401 for a streamed body: no replay", async () => {
    const r = await run(plain, { request: { method: "PUT", body: Readable.from(["x"]) } });
    r.dispatcher.last.respond(401, {}, "no");
    await flushPromises();
    expect(r.dispatcher.attempts).toHaveLength(1);
    expect(r.test.answer().status).toBe(401);
    expect(r.tokens.invalidations).toBe(0);
  });

  it("keeps a DPoP resource server's nonces even for a streamed body (the token layer is there for DPoP)", async () => {
    const r = await run(dpopConfig, {
      request: {
        method: "PUT",
        body: Readable.from(["x"]),
        token: testToken("dpop-tok", { tokenType: "DPoP", dpop }),
      },
    });
    expect(r.dispatcher.last.header("authorization")).toBe("DPoP dpop-tok");
    r.dispatcher.last.respond(200, { "dpop-nonce": "from-stage-test" });
    expect(dpop.nonces.get("https://rs.example.test")).toBe("from-stage-test");
  });

  it("with pacing: an upstream's Retry-After pauses its pacer, and a replay takes a turn", async () => {
    const slowed = await run(paced);
    // Every upstream has pacing: its layers wait for an answer they act on.
    const layers = (slowed.test.request.exchange as unknown as { layers: { head: unknown } })
      .layers;
    expect(layers.head).toBeInstanceOf(ResponseRelay);
    slowed.dispatcher.last.respond(429, { "retry-after": "3" });
    expect(slowed.pacer.pauses.map((p) => p.reason)).toEqual(["429"]);
    expect(slowed.test.answer().status).toBe(429);

    const replayed = await run(paced);
    replayed.dispatcher.last.respond(401);
    await flushPromises();
    expect(replayed.pacer.acquisitions).toHaveLength(1);
    expect(replayed.dispatcher.attempts).toHaveLength(2);
  });

  it("with pacing: a 503 with Retry-After pauses the pacer and is relayed, not retried", async () => {
    // The pacing layer must see the answer before the retry layer, which would retry a 503.
    const r = await run(pacedRetrying503);
    r.dispatcher.last.respond(503, { "retry-after": "2" }, "busy");
    await new Promise((resolve) => setTimeout(resolve, 150));
    await flushPromises();
    expect(r.pacer.pauses.map((p) => p.reason)).toEqual(["503"]);
    expect(r.dispatcher.attempts).toHaveLength(1);
    expect(r.pacer.acquisitions).toHaveLength(0);
    expect(r.test.answer().status).toBe(503);
  });

  it("with pacing: a 503 without Retry-After is retried in a turn of the pacer", async () => {
    const r = await run(pacedRetrying503);
    r.dispatcher.last.respond(503, {}, "busy");
    // The first retry's backoff is under 50 ms (retry-policy.ts).
    await new Promise((resolve) => setTimeout(resolve, 150));
    await flushPromises();
    expect(r.pacer.pauses).toEqual([]);
    expect(r.pacer.acquisitions).toHaveLength(1);
    expect(r.dispatcher.attempts).toHaveLength(2);
    r.dispatcher.last.respond(200, {}, "ok");
    expect(r.test.answer().status).toBe(200);
    expect(r.test.record().attempts).toBe(2);
  });

  it("with pacing: a reset builds the layers, and is retried at once on a fresh connection", async () => {
    const r = await run(paced);
    r.dispatcher.last.fail(codedError("ECONNRESET"));
    expect(r.fresh.attempts).toHaveLength(1);
    r.fresh.last.respond(200, {}, "ok");
    expect(r.test.answer().status).toBe(200);
    expect(r.test.record().attempts).toBe(2);
  });

  it("for an upgrade's way in: the Upgrade goes through the upgrade dispatcher, a 101 to the tunnel", async () => {
    const handed: number[] = [];
    const r = await run(plain, {
      request: { kind: "upgrade" },
      upgradeProtocols: "websocket",
      onSwitchingProtocols: () => (status) => handed.push(status),
    });
    expect(r.dispatcher.attempts).toEqual([]);
    expect(r.upgradeDispatcher.last.options.upgrade).toBe("websocket");
    r.upgradeDispatcher.last.connect().handler.onUpgrade!(101, [], new PassThrough());
    expect(handed).toEqual([101]);
  });

  it("for the plain way in, an upgrade value on the request is not sent", async () => {
    const r = await run(plain, { upgradeProtocols: "websocket" });
    expect(r.upgradeDispatcher.attempts).toEqual([]);
    expect(r.dispatcher.last.options).not.toHaveProperty("upgrade");
  });
});
