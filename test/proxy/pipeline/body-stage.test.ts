/**
 * The body stage (src/proxy/pipeline/body-stage.ts), on Node's own request and response over a
 * real connection: no body goes on at once; a buffered body goes on once read whole (a Buffer,
 * the replay copy); a streamed one goes on at once as a stream; a buffered body that stalls is
 * answered 408, one whose client aborts finishes 499 with no answer; a streamed upload that
 * fails a limit is answered (413 here) and its upstream request aborted, or — once the answer
 * has started — its client connection cut.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { Readable } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import type { LimitsConfig } from "../../../src/config/proxy-config.js";
import { BodyStage } from "../../../src/proxy/pipeline/body-stage.js";
import { ProxiedRequest } from "../../../src/proxy/proxied-request.js";
import { planBody } from "../../../src/proxy/request-body.js";
import { parseResponses } from "../../helpers/raw-http.js";
import { makeProxyConfig, makeUpstreamConfig } from "../../helpers/upstream-config.js";
import { waitFor } from "../../helpers/wait.js";
import {
  makeRoute,
  openRawClient,
  RecordingContext,
  RecordingFlow,
} from "../support/pipeline-fakes.js";

const limits: LimitsConfig = {
  ...makeProxyConfig([]).limits,
  maxRequestBodySizeBytes: 50,
  // The idle timeout is the limit under test; the rate watch is off.
  minRequestBodyRate: 0,
};
const route = makeRoute(
  makeUpstreamConfig("upload", { replayBodyLimit: "16B", timeouts: { bodyIdle: "300ms" } }),
);

interface Arrived {
  request: ProxiedRequest;
  flow: RecordingFlow;
  ctx: RecordingContext;
  res: ServerResponse;
  /** Stages passed synchronously, within the 'request' event. */
  passedAtOnce: boolean;
}

let server: Server | undefined;
const sockets: Socket[] = [];

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

/** A server whose requests go through the body stage as the route stage leaves them. */
async function serve(): Promise<{ port: number; arrived: Arrived[] }> {
  const arrived: Arrived[] = [];
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const ctx = new RecordingContext();
    const request = new ProxiedRequest("request", req, res, ctx);
    request.markRouted(route);
    request.bodyPlan = planBody(req, route.config.replayBodyLimitBytes);
    request.maxBodyBytes = limits.maxRequestBodySizeBytes;
    res.on("close", () => {
      if (!res.writableFinished) request.clientClosed();
    });
    const flow = new RecordingFlow();
    new BodyStage(limits).run(request, flow);
    arrived.push({ request, flow, ctx, res, passedAtOnce: flow.passed.length === 1 });
  });
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  return { port: (server.address() as AddressInfo).port, arrived };
}

/** A raw client whose socket is destroyed after the test. */
function client(port: number) {
  const raw = openRawClient(port);
  sockets.push(raw.socket);
  return raw;
}

async function oneArrived(arrived: Arrived[]): Promise<Arrived> {
  await waitFor(() => arrived.length === 1, "the request to arrive");
  return arrived[0]!;
}

async function readAll(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString();
}

describe("BodyStage", () => {
  it("is named body", () => {
    expect(new BodyStage(limits).name).toBe("body");
  });

  it("passes a request without a body on at once", async () => {
    const { port, arrived } = await serve();
    client(port).socket.write("GET /x HTTP/1.1\r\nHost: a\r\n\r\n");
    const { request, passedAtOnce } = await oneArrived(arrived);
    expect(passedAtOnce).toBe(true);
    expect(request.body).toBeNull();
  });

  it("reads a small body whole into a Buffer, then goes on", async () => {
    const { port, arrived } = await serve();
    const c = client(port);
    c.socket.write("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\nhello");
    const one = await oneArrived(arrived);
    expect(one.passedAtOnce).toBe(false);
    expect(one.flow.passed).toEqual([]);

    c.socket.write(" world");
    await waitFor(() => one.flow.passed.length === 1, "the stage to pass the request");
    expect(Buffer.isBuffer(one.request.body)).toBe(true);
    expect(String(one.request.body)).toBe("hello world");
    expect(one.request.bytesIn()).toBe(11);
  });

  it("streams a body over replayBodyLimit, going on at once", async () => {
    const { port, arrived } = await serve();
    const c = client(port);
    const payload = "x".repeat(40);
    c.socket.write(`PUT /x HTTP/1.1\r\nHost: a\r\nContent-Length: 40\r\n\r\n${payload}`);
    const one = await oneArrived(arrived);
    expect(one.passedAtOnce).toBe(true);
    expect(one.request.body).toBeInstanceOf(Readable);
    expect(Buffer.isBuffer(one.request.body)).toBe(false);
    expect(await readAll(one.request.body as Readable)).toBe(payload);
    expect(one.request.bytesIn()).toBe(40);
  });

  it("answers 408 request_timeout when a buffered body stalls", async () => {
    const { port, arrived } = await serve();
    const c = client(port);
    c.socket.write("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc");
    const one = await oneArrived(arrived);
    await waitFor(() => one.ctx.records.length === 1, "the request to finish");
    expect(one.flow.passed).toEqual([]);
    expect(one.ctx.records[0]).toMatchObject({ status: 408, errorCode: "request_timeout" });
    await waitFor(() => c.text().includes("\r\n\r\n"), "the answer");
    expect(parseResponses(c.text())[0]!.status).toBe(408);
  });

  it("finishes 499 without an answer when the client aborts a buffered body", async () => {
    const { port, arrived } = await serve();
    const c = client(port);
    c.socket.write("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc");
    const one = await oneArrived(arrived);
    c.socket.destroy();
    await waitFor(() => one.ctx.records.length === 1, "the request to finish");
    expect(one.flow.passed).toEqual([]);
    expect(one.ctx.records[0]).toMatchObject({ status: 499, errorCode: "client_closed" });
  });

  it("answers a streamed upload over the limit 413 and aborts its upstream request", async () => {
    const { port, arrived } = await serve();
    const c = client(port);
    c.socket.write("POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
    const one = await oneArrived(arrived);
    expect(one.passedAtOnce).toBe(true);
    // The exchange is under way: it hooked its abort into the request.
    let aborted = 0;
    one.request.exchange = { abortFromClient: () => aborted++ };
    (one.request.body as Readable).resume();

    c.socket.write(`40\r\n${"y".repeat(64)}\r\n`);
    await waitFor(() => one.ctx.records.length === 1, "the request to finish");
    expect(one.ctx.records[0]).toMatchObject({ status: 413, errorCode: "payload_too_large" });
    expect(aborted).toBe(1);
    await waitFor(() => c.text().includes("\r\n\r\n"), "the answer");
    expect(parseResponses(c.text())[0]!.status).toBe(413);
  });

  it("cuts the client connection when a streamed upload stalls after the answer started", async () => {
    const { port, arrived } = await serve();
    const c = client(port);
    c.socket.write(
      "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
    );
    const one = await oneArrived(arrived);
    (one.request.body as Readable).resume();
    // The upstream answered early; the relay started the client's response.
    one.res.writeHead(200, { "content-type": "text/plain" });
    one.res.write("partial");

    await waitFor(() => c.closed(), "the client connection to be cut");
    expect(one.res.destroyed).toBe(true);
    expect(parseResponses(c.text())[0]!.status).toBe(200);
  });
});
