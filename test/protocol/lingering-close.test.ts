import { createServer } from "node:http";
import { type AddressInfo, connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createLingeringClose,
  LINGER_LIMITS,
  type LingerLimits,
} from "../../src/proxy/lingering-close.js";
import { waitFor } from "../helpers/wait.js";
import { type ProxiedRawUpstream, startProxiedRawUpstream } from "./support/proxy-to.js";

/**
 * Lingering close (RFC 9112 §9.6): the proxy answers before it has read the request body (an
 * upstream's early 401/411/413) and closes the connection while the client is still uploading.
 * Closing a socket with unread bytes makes the kernel send a RST; the client's next write then
 * fails (EPIPE: the RST came after our FIN) and it never reads the answer already on the wire —
 * `curl: (55) Send failure: Broken pipe`, once in 60 curl -T runs of
 * early-answer-then-close.test.ts under a loaded full suite.
 *
 * The two clients below lose the answer every time without the linger (client and proxy share
 * one event loop here, so the RST always lands between the client's reads and its next write):
 * `LINGER=off npx vitest run test/protocol/lingering-close.test.ts` strips it from every
 * connection (this file only) to show it.
 */

const MIB = 1024 * 1024;
const TRIES = 50;
const BODY_BYTES = 8 * MIB;
/** The route's body limit: the 8 MiB uploads pass it (the upstream answers them early). */
const MAX_BODY_BYTES = 8 * MIB;
const CHUNK = Buffer.alloc(64 * 1024, "u");
const lingerOff = process.env.LINGER === "off";

/**
 * How the client uploads:
 * - `curl`: a chunk every turn of its event loop, reading in between; once the answer is in it
 *   stops uploading and closes (curl: "HTTP error before end of send, stop sending");
 * - `write-then-read`: the whole body as fast as the proxy takes it, then reads (Python's
 *   http.client, many scripts).
 */
type ClientKind = "curl" | "write-then-read";

interface UploadResult {
  status: number | undefined;
  /** The whole answer (head and Content-Length body) arrived. */
  complete: boolean;
  /** The socket error that ended the upload, if any. */
  error: string | undefined;
}

/** An 8 MiB PUT on a fresh connection. */
function upload(port: number, path: string, kind: ClientKind): Promise<UploadResult> {
  return new Promise((resolve) => {
    const socket: Socket = connect(port, "127.0.0.1");
    const received: Buffer[] = [];
    let settled = false;
    let error: string | undefined;
    const timer = setTimeout(() => finish(), 20_000);
    function parsed() {
      const text = Buffer.concat(received).toString("latin1");
      const headEnd = text.indexOf("\r\n\r\n");
      if (headEnd === -1) return { status: undefined, complete: false };
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]);
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(text.slice(0, headEnd))?.[1]);
      return { status, complete: text.length - headEnd - 4 >= length };
    }
    function finish() {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ ...parsed(), error });
    }
    if (kind === "write-then-read") socket.pause();
    socket.on("data", (chunk: Buffer) => {
      received.push(chunk);
      if (parsed().complete) finish();
    });
    socket.on("error", (err: NodeJS.ErrnoException) => {
      error = err.code;
      finish();
    });
    socket.on("close", finish);
    socket.on("connect", async () => {
      socket.write(
        `PUT ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: ${BODY_BYTES}\r\n\r\n`,
      );
      for (let left = BODY_BYTES; left > 0 && !settled; left -= CHUNK.length) {
        const full = !socket.write(left >= CHUNK.length ? CHUNK : CHUNK.subarray(0, left));
        if (kind === "curl") await new Promise((next) => setImmediate(next));
        else if (full) {
          await new Promise<void>((drained) => {
            socket.once("drain", drained);
            socket.once("close", drained);
          });
        }
      }
      if (settled) return;
      socket.resume();
    });
  });
}

async function requestCount(setup: ProxiedRawUpstream): Promise<number> {
  const { values } = await setup.proxy.metrics.requestsTotal.get();
  return values.reduce((sum, v) => sum + v.value, 0);
}

async function clientErrorCount(setup: ProxiedRawUpstream): Promise<number> {
  const { values } = await setup.proxy.metrics.errorsTotal.get();
  return values.filter((v) => v.labels.upstream === "none").reduce((sum, v) => sum + v.value, 0);
}

function tally(results: UploadResult[]) {
  const counts: Record<string, number> = {};
  for (const r of results) {
    const key = r.complete ? `${r.status}` : `lost (${r.error ?? "closed"})`;
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

describe("lingering close after an early answer", () => {
  let setup: ProxiedRawUpstream;

  beforeAll(async () => {
    setup = await startProxiedRawUpstream(
      ({ head, socket }) => {
        const status = /^PUT \/(\d+)/.exec(head)?.[1] ?? "413";
        const answer = JSON.stringify({ error: `early ${status}` });
        socket.write(
          `HTTP/1.1 ${status} Early\r\ncontent-type: application/json\r\n` +
            `content-length: ${answer.length}\r\nconnection: close\r\n\r\n${answer}`,
        );
        socket.end(() => socket.destroy());
        return new Promise<void>(() => {});
      },
      { maxRequestBodySize: MAX_BODY_BYTES },
    );
    if (lingerOff) {
      for (const { proxy } of setup.proxy.listeners) {
        // Runs after the proxy's own 'connection' listener: back to Node's plain destroySoon.
        proxy.server.on("connection", (socket: Socket) => {
          Reflect.deleteProperty(socket, "destroySoon");
        });
      }
    }
  });
  afterAll(async () => {
    await setup.close();
  });

  for (const kind of ["curl", "write-then-read"] as const) {
    it(`${TRIES} × 8 MiB PUT, client ${kind}: the whole early answer every time`, async () => {
      const results: UploadResult[] = [];
      const started = performance.now();
      for (let i = 0; i < TRIES; i++) {
        const status = [401, 411, 413][i % 3]!;
        results.push(await upload(setup.proxy.port, `/${status}`, kind));
      }
      const seconds = (performance.now() - started) / 1000;
      console.log(
        `lingering close${lingerOff ? " OFF" : ""}, client ${kind}: ${TRIES} × 8 MiB PUT in ` +
          `${seconds.toFixed(1)} s: ${JSON.stringify(tally(results))}`,
      );
      expect(tally(results)).toEqual({
        401: Math.ceil(TRIES / 3),
        411: Math.ceil((TRIES - 1) / 3),
        413: Math.floor(TRIES / 3),
      });
    }, 120_000);
  }

  // The upstream's early answer, and the proxy's own (a declared length over the route's limit:
  // Node then drains the body through its parser, which would reach the pipelined request).
  for (const [who, bodyBytes, upstreamHeads] of [
    ["the upstream's", 2 * MIB, ["PUT /413 HTTP/1.1"]],
    ["the proxy's own", MAX_BODY_BYTES + MIB, []],
  ] as const) {
    it(`after ${who} early answer, later bytes are discarded, never parsed as a request`, async () => {
      const headsBefore = setup.upstream.heads.length;
      const requestsBefore = await requestCount(setup);
      const proxy = setup.proxy.listeners[0]!.proxy;
      const parsed: string[] = [];
      const onRequest = (req: { url?: string }) => parsed.push(req.url ?? "");
      proxy.server.on("request", onRequest);
      // The client's 'close' only says both FINs went by; the proxy may not have read up to
      // its FIN yet. Its own side closes once it has.
      const proxySideClosed = new Promise((resolve) =>
        proxy.server.once("connection", (side: Socket) => side.once("close", resolve)),
      );
      const socket = connect(setup.proxy.port, "127.0.0.1");
      socket.on("error", () => {});
      const received: Buffer[] = [];
      socket.on("data", (chunk: Buffer) => received.push(chunk));
      const closed = new Promise((resolve) => socket.once("close", resolve));
      // The whole body, a pipelined request, then our FIN: the proxy reads all of it while it
      // lingers, and closes once it has read the FIN.
      socket.write(`PUT /413 HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: ${bodyBytes}\r\n\r\n`);
      socket.write(Buffer.alloc(bodyBytes, "u"));
      socket.end("GET /pipelined HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n");
      await closed;
      await proxySideClosed;
      proxy.server.off("request", onRequest);
      expect(parsed).toEqual(["/413"]);
      const text = Buffer.concat(received).toString("latin1");
      expect(text.match(/^HTTP\/1\.1 /gm)).toEqual(["HTTP/1.1 "]);
      expect(text).toMatch(/^HTTP\/1\.1 413 /);
      expect(setup.upstream.heads.slice(headsBefore).map((h) => h.split("\r\n")[0])).toEqual(
        upstreamHeads,
      );
      await waitFor(() => proxy.inFlight() === 0, "no request in flight");
      expect((await requestCount(setup)) - requestsBefore).toBe(1);
      // …nor as a client error (Node's parser sees the client's FIN inside the body it cut off).
      expect(await clientErrorCount(setup)).toBe(0);
    });
  }

  it.skipIf(lingerOff)(
    "a client that neither sends nor closes is let go after the idle bound",
    async () => {
      // The proxy's side of the connection: the client can't see it close (it already has
      // our FIN, and a socket with nothing to send learns nothing more).
      const proxySide = new Promise<Socket>((resolve) =>
        setup.proxy.listeners[0]!.proxy.server.once("connection", resolve),
      );
      // allowHalfOpen: our side stays open after the proxy's FIN (else it ends the linger).
      const sentAt = performance.now();
      const socket = connect({ port: setup.proxy.port, host: "127.0.0.1", allowHalfOpen: true });
      socket.on("error", () => {});
      // Half the body, then silence: the proxy answers (the upstream answers early) and lingers.
      socket.write(`PUT /413 HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: ${2 * MIB}\r\n\r\n`);
      socket.write(Buffer.alloc(MIB, "u"));
      const closed = proxySide.then(
        (side) =>
          new Promise<number>((resolve) => side.once("close", () => resolve(performance.now()))),
      );
      const answeredAt = await new Promise<number>((resolve) => {
        socket.once("data", () => resolve(performance.now()));
      });
      const closedAt = await closed;
      socket.destroy();
      // Bracketed by our own timestamps: the linger began after we sent and before the answer
      // reached us (a loaded loop may deliver it late), so closedAt − answeredAt can only
      // understate it and closedAt − sentAt only overstate it. Idle 2 s: a linger that ends at
      // once reads ~0, and one that ignored the idle bound would end at the 10 s total.
      expect(closedAt - answeredAt).toBeGreaterThan(LINGER_LIMITS.idleMs / 2);
      expect(closedAt - sentAt).toBeLessThan(LINGER_LIMITS.idleMs + 4_000);
    },
    15_000,
  );
});

describe("lingering close and shutdown", () => {
  it.skipIf(lingerOff)(
    "close() does not wait on a lingering connection beyond its grace",
    async () => {
      const setup = await startProxiedRawUpstream(({ socket }) => {
        socket.end("HTTP/1.1 401 Early\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        return new Promise<void>(() => {});
      });
      const socket = connect({ port: setup.proxy.port, host: "127.0.0.1", allowHalfOpen: true });
      socket.on("error", () => {});
      socket.write(`PUT /x HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: ${4 * MIB}\r\n\r\n`);
      socket.write(Buffer.alloc(2 * MIB, "u"));
      await new Promise((resolve) => socket.once("data", resolve));
      // Keep the linger alive: a byte every 100 ms, well inside its idle bound.
      const trickle = setInterval(() => socket.write("u"), 100);
      const closed = new Promise((resolve) => socket.once("close", resolve));
      try {
        const started = performance.now();
        await setup.proxy.listeners[0]!.proxy.close(300);
        const tookMs = performance.now() - started;
        // The 300 ms grace, where waiting on the linger would take its 10 s total bound (the
        // trickle keeps it from going idle).
        expect(tookMs).toBeGreaterThanOrEqual(250);
        expect(tookMs).toBeLessThan(5_000);
        await closed;
      } finally {
        clearInterval(trickle);
        await setup.close();
      }
    },
  );
});

describe("lingering close bounds", () => {
  /** A node:http server that answers 413 at once and closes, lingering with `limits`. */
  async function answeringServer(limits: LingerLimits) {
    const lingering = createLingeringClose(limits);
    const server = createServer((_req, res) => {
      res.writeHead(413, { connection: "close", "content-length": 0 });
      res.end();
    });
    const closedAt: Promise<number>[] = [];
    server.on("connection", (socket: Socket) => {
      lingering.watch(socket);
      closedAt.push(
        new Promise((resolve) => socket.once("close", () => resolve(performance.now()))),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return { server, lingering, port: (server.address() as AddressInfo).port, closedAt };
  }

  /**
   * Sends a head announcing a huge body, then `send` until the connection ends — or until
   * `giveUpMs` after the answer, when we end it ourselves (a linger that is never cut then
   * fails a test's bound instead of hanging it).
   */
  async function uploadUntilCut(
    port: number,
    send: (socket: Socket) => () => void,
    giveUpMs?: number,
  ) {
    const socket = connect({ port, host: "127.0.0.1", allowHalfOpen: true });
    socket.on("error", () => {});
    socket.write(`PUT / HTTP/1.1\r\nhost: a\r\ncontent-length: ${1024 * MIB}\r\n\r\n`);
    const answeredAt = await new Promise<number>((resolve) =>
      socket.once("data", () => resolve(performance.now())),
    );
    const stop = send(socket);
    const giveUp =
      giveUpMs === undefined ? undefined : setTimeout(() => socket.destroy(), giveUpMs);
    await new Promise((resolve) => socket.once("close", resolve));
    clearTimeout(giveUp);
    stop();
    return answeredAt;
  }

  it("a client that keeps sending is cut after the total bound", async () => {
    // Total 1 s, idle 5 s: only the total bound ends this linger near 1 s. The client sends a
    // byte every 50 ms, so the idle bound never comes; without the total bound nothing cuts the
    // linger and the client gives up after 6 s (an idle bound that ignored the bytes: 5 s).
    const { server, port, closedAt, lingering } = await answeringServer({
      idleMs: 5_000,
      totalMs: 1_000,
      maxBytes: 1024 * MIB,
    });
    try {
      const sentAt = performance.now();
      const answeredAt = await uploadUntilCut(
        port,
        (socket) => {
          const trickle = setInterval(() => socket.write("u"), 50);
          return () => clearInterval(trickle);
        },
        6_000,
      );
      // Bracketed by our own timestamps (the linger began after we sent and before the answer
      // reached us): at least half the total bound, and well before the idle bound.
      const cutAt = await closedAt[0]!;
      expect(cutAt - answeredAt).toBeGreaterThan(500);
      expect(cutAt - sentAt).toBeLessThan(3_000);
      expect(lingering.count()).toBe(0);
    } finally {
      server.close();
    }
  });

  it("a client that keeps sending is cut after the byte bound", async () => {
    const { server, port, closedAt } = await answeringServer({
      idleMs: 5_000,
      totalMs: 10_000,
      maxBytes: 4 * MIB,
    });
    let sent = 0;
    try {
      await uploadUntilCut(port, (socket) => {
        let stopped = false;
        const pump = () => {
          while (!stopped && socket.write(CHUNK)) sent += CHUNK.length;
          if (!stopped) socket.once("drain", pump);
        };
        pump();
        return () => {
          stopped = true;
        };
      });
      await closedAt[0];
      // Cut once 4 MiB were discarded, give or take what the kernel buffers held.
      expect(sent).toBeGreaterThan(4 * MIB);
      expect(sent).toBeLessThan(64 * MIB);
    } finally {
      server.close();
    }
  });
});
