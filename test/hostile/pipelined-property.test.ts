/**
 * Issue 14, the property behind the hostile suite: for any sequence of pipelined requests and
 * a disconnect at any byte, the process survives and the upstream receives no request the client
 * did not fully send (head and body). A streamed (chunked) upload's head does reach the upstream
 * before its body is complete — that is what streaming is — but a client that hangs up mid-body
 * gets the upstream request aborted, so it never arrives whole.
 */
import { once } from "node:events";
import { connect } from "node:net";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type HostileWorld,
  RSS_GROWTH_LIMIT_BYTES,
  sleep,
  startHostileWorld,
  stillAlive,
} from "./support/hostile-world.js";

let world: HostileWorld;
beforeAll(async () => {
  world = await startHostileWorld();
}, 60_000);
afterAll(() => world?.close());

const requestSpec = fc.record({
  method: fc.constantFrom("GET", "POST", "PUT", "DELETE"),
  bodyLength: fc.integer({ min: 0, max: 300 }),
  chunked: fc.boolean(),
});

/** The bytes of one request, ending exactly where the request is complete. */
function encode(
  spec: { method: string; bodyLength: number; chunked: boolean },
  path: string,
): string {
  const body = "b".repeat(spec.bodyLength);
  if (spec.method === "GET" || spec.bodyLength === 0) {
    return `${spec.method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`;
  }
  if (spec.chunked) {
    return `${spec.method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
  }
  return `${spec.method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
}

let run = 0;

describe("pipelined requests cut at any byte", () => {
  it("the process survives and the upstream sees only fully sent requests", async () => {
    const rssBefore = world.rssBytes();
    await fc.assert(
      fc.asyncProperty(
        fc.array(requestSpec, { minLength: 1, maxLength: 6 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.boolean(),
        async (specs, cutAt, reset) => {
          const prefix = `/echo/prop-${++run}-`;
          const encoded = specs.map((spec, i) => encode(spec, `${prefix}${i}`));
          const ends: number[] = [];
          let total = 0;
          for (const part of encoded) {
            total += part.length;
            ends.push(total);
          }
          const cut = Math.floor(cutAt * total);
          const socket = connect(world.port, "127.0.0.1");
          socket.on("error", () => {});
          socket.on("data", () => {});
          await once(socket, "connect");
          const sent = encoded.join("").slice(0, cut);
          if (reset) {
            await new Promise<void>((r) => socket.write(sent, () => r()));
            socket.resetAndDestroy();
          } else {
            socket.end(sent);
          }
          await sleep(150);
          socket.destroy();
          const seen = world.upstream.completedRequests
            .filter((r) => r.url.startsWith(prefix))
            .map((r) => Number(r.url.slice(prefix.length)));
          for (const index of seen) expect(ends[index]!).toBeLessThanOrEqual(cut);
        },
      ),
      { numRuns: 30 },
    );
    await sleep(300);
    expect(await stillAlive(world)).toEqual({ pid: world.pid, live: true });
    expect(world.rssBytes() - rssBefore).toBeLessThan(RSS_GROWTH_LIMIT_BYTES);
  });
});
