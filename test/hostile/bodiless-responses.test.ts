/**
 * Issue 14 item 8: a 304 (or 204) that carries Content-Length is complete without a body
 * (RFC 9110 §8.6, §15.4.5); undici 7 raises UND_ERR_RES_CONTENT_LENGTH_MISMATCH for it and
 * the proxy used to destroy the client connection after writing the head.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultRoutes } from "../helpers/fake-upstreams.js";
import { rawRequest } from "../helpers/raw-http.js";
import { type HostileWorld, startHostileWorld, stillAlive } from "./support/hostile-world.js";

function withBodilessLengths(req: IncomingMessage, res: ServerResponse): void {
  const status = req.url === "/not-modified" ? 304 : req.url === "/no-content" ? 204 : 0;
  if (status === 0) {
    defaultRoutes(req, res);
    return;
  }
  // Node writes what it is given: the length of the representation, no body.
  res.writeHead(status, { "content-length": "1234", etag: '"v1"' });
  res.end();
}

let world: HostileWorld;
beforeAll(async () => {
  world = await startHostileWorld({ handler: withBodilessLengths });
}, 60_000);
afterAll(() => world?.close());

describe("bodiless responses with Content-Length", () => {
  it.each(["/not-modified", "/no-content"])(
    "%s: answered normally, the client connection kept for the next request",
    async (path) => {
      const answer = await rawRequest(
        world.port,
        `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /status/200 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`,
        // Kept alive after both: done once both answers are in.
        { timeoutMs: 15_000, until: (responses) => responses.length === 2 },
      );
      expect(answer.responses.map((r) => r.status)).toEqual([
        path === "/not-modified" ? 304 : 204,
        200,
      ]);
      expect(answer.responses[0]!.headers.get("bearer-proxy-error")).toBeUndefined();
      expect(await stillAlive(world)).toEqual({ pid: world.pid, live: true });
    },
  );
});
