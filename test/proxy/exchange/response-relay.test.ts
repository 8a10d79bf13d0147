/**
 * The response relay (src/proxy/exchange/response-relay.ts), the innermost layer, writing to a
 * real client over a real connection (Node's own request and response) while the test answers
 * the exchange's attempt: head and body relayed with hop-by-hop fields dropped and the exchange
 * finished with the status and bytes; the admission's RateLimit fields added; trailers to a
 * chunked response; 103 Early Hints to HTTP/1.1 clients only; the upstream paused while the
 * client's buffer is full and resumed on drain; a client slower than `minResponseRate` cut off
 * and the upstream attempt aborted; failures before the head answered with the error contract,
 * after it by cutting the connection; a 304 that undici calls a length mismatch ended normally;
 * a header Node refuses answered 502; a 101 handed to the tunnel.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { type Duplex, PassThrough } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import type { LimitsConfig, UpstreamConfig } from "../../../src/config/proxy-config.js";
import type { RawHeaders } from "../../../src/net/raw-headers.js";
import { Exchange, type ExchangeLayers } from "../../../src/proxy/exchange/exchange.js";
import {
  ResponseRelay,
  type SwitchingProtocols,
} from "../../../src/proxy/exchange/response-relay.js";
import { ProxiedRequest } from "../../../src/proxy/proxied-request.js";
import { parseResponses } from "../../helpers/raw-http.js";
import { makeProxyConfig, makeUpstreamConfig } from "../../helpers/upstream-config.js";
import { waitFor } from "../../helpers/wait.js";
import {
  codedError,
  type DispatchedAttempt,
  errorBody,
  exchangeRig,
  makePacing,
  makeRoute,
  openRawClient,
  type RawClient,
  RecordingContext,
  ScriptedDispatcher,
  testToken,
} from "../support/pipeline-fakes.js";

/** Layers with the relay alone: what these tests look at, without retry or replay around it. */
function relayOnly(relay: ResponseRelay): ExchangeLayers {
  return {
    head: relay,
    relay,
    span: undefined,
    pacing: undefined,
    retry: undefined,
    recoveries: undefined,
  };
}

const defaultLimits = makeProxyConfig([]).limits;
const noRate: Pick<LimitsConfig, "minResponseRate" | "minDataRateGraceMs"> = {
  minResponseRate: 0,
  minDataRateGraceMs: defaultLimits.minDataRateGraceMs,
};

let server: Server | undefined;
const sockets: Socket[] = [];

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

interface Relayed {
  request: ProxiedRequest;
  ctx: RecordingContext;
  exchange: Exchange;
  attempt: DispatchedAttempt;
  client: RawClient;
}

/**
 * A server whose one request is sent upstream through an exchange whose only layer is the
 * relay; resolves once the attempt is out, with the client that sent `head`.
 */
async function relayOne(
  head: string,
  options: {
    limits?: Pick<LimitsConfig, "minResponseRate" | "minDataRateGraceMs">;
    config?: UpstreamConfig;
    rateLimit?: string;
  } = {},
): Promise<Relayed> {
  const config = options.config ?? makeUpstreamConfig("api");
  const dispatcher = new ScriptedDispatcher();
  const route = makeRoute(config, {
    dispatcher,
    pacing: config.rateLimit === undefined ? undefined : makePacing(config),
  });
  const ready: Omit<Relayed, "client">[] = [];
  server = createServer((req, res) => {
    const ctx = new RecordingContext();
    const request = new ProxiedRequest("request", req, res, ctx);
    request.markRouted(route);
    const built = route.headers.build(req.rawHeaders, { remoteAddress: undefined, authority: "a" });
    if (built.kind !== "ok") throw new Error(built.message);
    request.headers = built.headers;
    request.slots = built;
    request.upstreamPath = req.url ?? "/";
    request.token = testToken("tok");
    request.rateLimit = options.rateLimit;
    res.on("close", () => {
      if (!res.writableFinished) request.clientClosed();
    });
    const exchange = new Exchange(request, undefined);
    const relay = new ResponseRelay(exchange, options.limits ?? noRate);
    exchange.start(relayOnly(relay));
    ready.push({ request, ctx, exchange, attempt: dispatcher.last.connect() });
  });
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  const client = openRawClient((server.address() as AddressInfo).port);
  sockets.push(client.socket);
  client.socket.write(head);
  await waitFor(() => ready.length === 1, "the request to reach the exchange");
  return { ...ready[0]!, client };
}

const GET = "GET /x HTTP/1.1\r\nHost: a\r\n\r\n";

describe("ResponseRelay", () => {
  it("relays head and body without hop-by-hop fields, and finishes with the status and bytes", async () => {
    const r = await relayOne(GET);
    r.attempt.head(200, {
      "content-type": "text/plain",
      "content-length": "5",
      connection: "keep-alive, x-hop",
      "x-hop": "1",
      "keep-alive": "timeout=99",
      "x-up": "yes",
    });
    r.attempt.data("hello");
    r.attempt.complete();
    await waitFor(() => parseResponses(r.client.text()).length === 1, "the response");
    const answer = parseResponses(r.client.text())[0]!;
    expect(answer.status).toBe(200);
    expect(answer.body).toBe("hello");
    expect(answer.headers.get("x-up")).toEqual(["yes"]);
    expect(answer.headers.has("x-hop")).toBe(false);
    // Node writes its own Keep-Alive for the client's connection; the upstream's is gone.
    expect(answer.headers.get("keep-alive")).not.toContain("timeout=99");
    expect(r.ctx.records[0]).toMatchObject({ status: 200, bytesOut: 5, errorCode: undefined });
    expect(r.exchange.finished).toBe(true);
    expect(r.client.closed()).toBe(false);
  });

  it("adds the admission's RateLimit fields when the upstream advertises a policy", async () => {
    const r = await relayOne(GET, {
      config: makeUpstreamConfig("limited", { rateLimit: { requests: 5, per: "1s" } }),
      rateLimit: '"default";r=4;t=1',
    });
    r.attempt.respond(200, {}, "ok");
    await waitFor(() => parseResponses(r.client.text()).length === 1, "the response");
    const answer = parseResponses(r.client.text())[0]!;
    expect(answer.headers.get("ratelimit")).toEqual(['"default";r=4;t=1']);
    expect(answer.headers.get("ratelimit-policy")?.[0]).toContain("q=5");
  });

  it("relays trailers when the client's response is chunked", async () => {
    const r = await relayOne("GET /x HTTP/1.1\r\nHost: a\r\nTE: trailers\r\n\r\n");
    r.attempt.head(200, { "transfer-encoding": "chunked", trailer: "x-checksum" });
    r.attempt.data("part");
    r.attempt.complete(["x-checksum", "abc123"]);
    await waitFor(() => r.client.text().includes("\r\n0\r\n"), "the last chunk");
    await waitFor(() => r.client.text().endsWith("\r\n\r\n"), "the trailer section");
    expect(r.client.text()).toContain("\r\n0\r\nx-checksum: abc123\r\n\r\n");
    expect(parseResponses(r.client.text())[0]!.body).toBe("part");
  });

  it("relays 103 Early Hints to an HTTP/1.1 client, and not to an HTTP/1.0 one", async () => {
    const hints = { link: "</style.css>; rel=preload; as=style" };
    const r11 = await relayOne(GET);
    r11.attempt.head(103, hints);
    r11.attempt.respond(200, {}, "ok");
    await waitFor(() => r11.client.text().includes("ok"), "the response");
    expect(r11.client.text()).toMatch(/^HTTP\/1\.1 103 Early Hints\r\n/);
    expect(r11.client.text()).toContain("</style.css>; rel=preload; as=style");
    server!.close();
    server = undefined;

    const r10 = await relayOne("GET /x HTTP/1.0\r\nHost: a\r\n\r\n");
    r10.attempt.head(103, hints);
    r10.attempt.respond(200, {}, "ok");
    await waitFor(() => r10.client.text().includes("ok"), "the response");
    expect(r10.client.text()).toMatch(/^HTTP\/1\.1 200 /);
    expect(r10.client.text()).not.toContain("103 Early Hints");
  });

  it("answers a failure before the head with the error contract (502 upstream_reset)", async () => {
    const r = await relayOne(GET);
    r.attempt.error(codedError("ECONNRESET"));
    await waitFor(() => parseResponses(r.client.text()).length === 1, "the answer");
    const answer = parseResponses(r.client.text())[0]!;
    expect(answer.status).toBe(502);
    expect(errorBody(answer).code).toBe("upstream_reset");
    expect(r.ctx.records[0]).toMatchObject({ status: 502, errorCode: "upstream_reset" });
  });

  it("cuts the connection on a failure after the head: the client sees a truncated response", async () => {
    const r = await relayOne(GET);
    r.attempt.head(200, { "content-length": "100" });
    r.attempt.data("only this");
    await waitFor(() => r.client.text().includes("only this"), "the start of the body");
    r.attempt.error(codedError("ECONNRESET"));
    await waitFor(() => r.client.closed(), "the connection to be cut");
    expect(r.client.text()).toMatch(/^HTTP\/1\.1 200 /);
    expect(r.client.text()).not.toContain("upstream_reset");
    expect(r.ctx.records[0]).toMatchObject({
      status: 200,
      errorCode: "upstream_reset",
      bytesOut: 9,
    });
  });

  it("ends a 304 normally when undici calls its Content-Length a mismatch", async () => {
    const r = await relayOne(GET);
    r.attempt.head(304, { "content-length": "1234", etag: '"v1"' });
    r.attempt.error(codedError("UND_ERR_RES_CONTENT_LENGTH_MISMATCH"));
    await waitFor(() => r.ctx.records.length === 1, "the request to finish");
    expect(r.ctx.records[0]).toMatchObject({ status: 304, errorCode: undefined });
    await waitFor(() => parseResponses(r.client.text()).length === 1, "the response");
    expect(parseResponses(r.client.text())[0]!.status).toBe(304);
    expect(r.client.closed()).toBe(false);
  });

  it("answers 502 upstream_error, aborting the attempt, for a header Node refuses to write", async () => {
    const r = await relayOne(GET);
    r.attempt.head(200, { "x-bad": "a\u0001b" });
    await waitFor(() => parseResponses(r.client.text()).length === 1, "the answer");
    const answer = parseResponses(r.client.text())[0]!;
    expect(answer.status).toBe(502);
    expect(errorBody(answer).code).toBe("upstream_error");
    expect(r.attempt.aborted).toBe(true);
  });

  // Regression (main's forward.ts aborted the attempt first): undici's abort calls onError at
  // once, so the generic mapping ("forwarding to upstream … failed") answered before the relay's
  // own message could.
  it("says which header could not be relayed", async () => {
    const r = await relayOne(GET);
    r.attempt.head(200, { "x-bad": "a\u0001b" });
    await waitFor(() => parseResponses(r.client.text()).length === 1, "the answer");
    expect(errorBody(parseResponses(r.client.text())[0]!).message).toBe(
      "upstream api sent a response header that can't be relayed",
    );
  });

  it("pauses the upstream while the client's buffer is full, and resumes it on drain", async () => {
    const r = await relayOne(GET);
    r.attempt.head(200, { "content-length": String(8 * 1024 * 1024) });
    // Bigger than any socket buffer: Node keeps part of it, and says so.
    expect(r.attempt.data(Buffer.alloc(8 * 1024 * 1024, "z"))).toBe(false);
    expect(r.attempt.resumed).toBe(0);
    await waitFor(() => r.attempt.resumed === 1, "the resume on drain");
    await waitFor(() => r.client.text().length > 8 * 1024 * 1024, "the body");
    r.attempt.complete();
    await waitFor(() => r.ctx.records.length === 1, "the request to finish");
    expect(r.ctx.records[0]!.bytesOut).toBe(8 * 1024 * 1024);
  });

  it("cuts off a client slower than minResponseRate and aborts the upstream attempt", async () => {
    const r = await relayOne(GET, {
      limits: { minResponseRate: 100 * 1024 * 1024, minDataRateGraceMs: 200 },
    });
    // The client stops reading.
    r.client.socket.pause();
    r.attempt.head(200, { "content-length": String(64 * 1024 * 1024) });
    let paused = false;
    for (let i = 0; i < 8 && !paused; i++) paused = !r.attempt.data(Buffer.alloc(8 * 1024 * 1024));
    expect(paused).toBe(true);
    await waitFor(() => r.ctx.records.length === 1, "the slow client to be cut off");
    expect(r.ctx.records[0]).toMatchObject({ status: 200, errorCode: "client_too_slow" });
    expect(r.attempt.aborted).toBe(true);
    expect(r.request.res.destroyed).toBe(true);
  });
});

describe("ResponseRelay and an upgrade's 101", () => {
  function upgradeRig(onSwitchingProtocols?: SwitchingProtocols) {
    const rig = exchangeRig(makeUpstreamConfig("ws"), {
      upgrade: "websocket",
      request: { kind: "upgrade" },
    });
    const relay = new ResponseRelay(rig.exchange, noRate, onSwitchingProtocols);
    rig.exchange.start(relayOnly(relay));
    return { ...rig, relay };
  }

  it("hands the 101 and the upstream connection to the tunnel, ending the exchange", () => {
    const handed: { status: number; raw: RawHeaders; socket: Duplex }[] = [];
    const r = upgradeRig((status, raw, socket) => handed.push({ status, raw, socket }));
    const socket = new PassThrough();
    const attempt = r.upgradeDispatcher.last.connect();
    attempt.handler.onUpgrade!(101, [Buffer.from("upgrade"), Buffer.from("websocket")], socket);
    expect(r.exchange.finished).toBe(true);
    expect(handed).toHaveLength(1);
    expect(handed[0]!.status).toBe(101);
    expect(handed[0]!.socket).toBe(socket);
    expect(socket.destroyed).toBe(false);
  });

  it("destroys an upgraded connection when there is no tunnel to hand it to", () => {
    const r = upgradeRig(undefined);
    const socket = new PassThrough();
    r.upgradeDispatcher.last.connect().handler.onUpgrade!(101, [], socket);
    expect(socket.destroyed).toBe(true);
  });
});
