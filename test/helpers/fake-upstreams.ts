import { createHash } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer as createHttpsServer, type Server } from "node:https";
import type { Socket } from "node:net";
import { freePort } from "./free-port.js";
import type { ServerCertificate } from "./tls.js";

/**
 * Small HTTPS upstreams that misbehave on purpose, for the proxy's error and framing tests.
 * Every one records what reached it (so a test can assert "nothing was forwarded") and counts
 * TCP connections and TLS handshakes (so a test can assert connection reuse).
 *
 * Routes of the default handler:
 * - `ANY /echo/...`            JSON {method, url, headers: [name, value][], bodyLength, bodySha256}
 * - `GET /download/<n>`        n bytes of a fixed pattern (backpressure honoured)
 * - `GET /slow-headers/<ms>`   answers after ms
 * - `GET /stall-body`          headers and 10 bytes of a 1000-byte body, then silence
 * - `GET /reset-before-response` destroys the connection without answering
 * - `GET /reset-mid-body`      headers and 100 of 1000 bytes, then destroys the connection
 * - `POST /early-401`          401 at once, without reading the request body
 * - `POST /early-answer`       413 at once, without reading the request body
 * - `GET /status/<code>`       that status, empty body
 * - anything else              404
 * With `authorize`, a request it refuses gets 401 before any route.
 */

export interface ReceivedRequest {
  method: string;
  url: string;
  headers: [string, string][];
}

export interface FakeUpstream {
  /** `https://127.0.0.1:<port>`. */
  origin: string;
  port: number;
  /** Requests whose headers reached the server, in order. */
  requests: ReceivedRequest[];
  /**
   * Requests that arrived whole (head and complete body), once a route has read the body: a
   * streamed upload whose client hung up reaches `requests` but never this list.
   */
  completedRequests: ReceivedRequest[];
  /** TLS handshakes completed (one per new connection that got past TLS). */
  tlsHandshakes(): number;
  /** TCP connections accepted (including ones whose TLS handshake failed). */
  connections(): number;
  /** Sockets currently open. */
  openSockets(): number;
  server: Server;
  close(): Promise<void>;
}

export interface FakeUpstreamOptions {
  cert: ServerCertificate;
  /** Replaces the default routes. */
  handler?: (req: IncomingMessage, res: ServerResponse) => void;
  /** Return false to answer 401 (`invalid_token`) before routing. */
  authorize?: (authorization: string | undefined, req: IncomingMessage) => boolean;
  /** Server keep-alive timeout; default Node's 5 s. */
  keepAliveTimeoutMs?: number;
}

const PATTERN = Buffer.alloc(64 * 1024, "0123456789abcdef");

export async function startFakeUpstream(options: FakeUpstreamOptions): Promise<FakeUpstream> {
  const requests: ReceivedRequest[] = [];
  const completedRequests: ReceivedRequest[] = [];
  const sockets = new Set<Socket>();
  let handshakes = 0;
  let connections = 0;
  const handler = options.handler ?? defaultRoutes;
  const server = createHttpsServer(
    { cert: options.cert.certPem, key: options.cert.keyPem },
    (req, res) => {
      const headers: [string, string][] = [];
      for (let i = 0; i < req.rawHeaders.length; i += 2) {
        headers.push([req.rawHeaders[i]!, req.rawHeaders[i + 1]!]);
      }
      const received = { method: req.method ?? "", url: req.url ?? "", headers };
      requests.push(received);
      req.once("end", () => {
        if (req.complete) completedRequests.push(received);
      });
      if (options.authorize && !options.authorize(req.headers.authorization, req)) {
        const body = JSON.stringify({ error: "invalid_token" });
        res.writeHead(401, {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
          "www-authenticate": 'Bearer error="invalid_token"',
        });
        res.end(body);
        return;
      }
      handler(req, res);
    },
  );
  if (options.keepAliveTimeoutMs !== undefined)
    server.keepAliveTimeout = options.keepAliveTimeoutMs;
  server.on("connection", (socket: Socket) => {
    connections++;
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  server.on("secureConnection", () => handshakes++);
  // Handshake failures (the proxy refusing our certificate) are expected in these tests.
  server.on("tlsClientError", () => {});
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    origin: `https://127.0.0.1:${port}`,
    port,
    requests,
    completedRequests,
    tlsHandshakes: () => handshakes,
    connections: () => connections,
    openSockets: () => sockets.size,
    server,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The default routes (see the module comment). */
export function defaultRoutes(req: IncomingMessage, res: ServerResponse): void {
  const url = req.url ?? "/";
  const path = url.split("?")[0]!;
  if (path.startsWith("/echo")) {
    echo(req, res);
    return;
  }
  if (path.startsWith("/download/")) {
    download(res, Number(path.slice("/download/".length)));
    return;
  }
  if (path.startsWith("/slow-headers/")) {
    const timer = setTimeout(() => res.end("late"), Number(path.slice("/slow-headers/".length)));
    res.on("close", () => clearTimeout(timer));
    return;
  }
  if (path === "/stall-body") {
    res.writeHead(200, { "content-length": 1000 });
    res.write("0123456789");
    return;
  }
  if (path === "/reset-before-response") {
    req.socket.destroy();
    return;
  }
  if (path === "/reset-mid-body") {
    res.writeHead(200, { "content-length": 1000 });
    res.write("x".repeat(100), () => setTimeout(() => req.socket.destroy(), 20));
    return;
  }
  if (path === "/early-401") {
    res.writeHead(401, { "content-type": "application/json", "content-length": 2 });
    res.end("{}");
    return;
  }
  if (path === "/early-answer") {
    res.writeHead(413, { "content-type": "application/json", "content-length": 2 });
    res.end("{}");
    return;
  }
  if (path.startsWith("/status/")) {
    res.writeHead(Number(path.slice("/status/".length)), { "content-length": 0 });
    res.end();
    return;
  }
  res.writeHead(404, { "content-length": 0 });
  res.end();
}

function echo(req: IncomingMessage, res: ServerResponse): void {
  const hash = createHash("sha256");
  let bodyLength = 0;
  req.on("data", (chunk: Buffer) => {
    bodyLength += chunk.length;
    hash.update(chunk);
  });
  req.on("end", () => {
    const headers: [string, string][] = [];
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      headers.push([req.rawHeaders[i]!, req.rawHeaders[i + 1]!]);
    }
    const body = JSON.stringify({
      method: req.method,
      url: req.url,
      headers,
      bodyLength,
      bodySha256: hash.digest("hex"),
    });
    res.writeHead(200, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(body),
    });
    res.end(body);
  });
}

function download(res: ServerResponse, total: number): void {
  res.writeHead(200, { "content-type": "application/octet-stream", "content-length": total });
  let remaining = total;
  const pump = () => {
    while (remaining > 0 && !res.destroyed) {
      const size = Math.min(remaining, PATTERN.length);
      remaining -= size;
      if (!res.write(PATTERN.subarray(0, size))) {
        res.once("drain", pump);
        return;
      }
    }
    if (remaining === 0) res.end();
  };
  pump();
}

/** sha256 of what `/download/<n>` serves. */
export function downloadSha256(total: number): string {
  const hash = createHash("sha256");
  let remaining = total;
  while (remaining > 0) {
    const size = Math.min(remaining, PATTERN.length);
    hash.update(PATTERN.subarray(0, size));
    remaining -= size;
  }
  return hash.digest("hex");
}

/**
 * A port on 127.0.0.1 that refuses connections: free, and from below the ephemeral range, so no
 * parallel test's listen(0) starts answering on it (free-port.ts).
 */
export function closedPort(): Promise<number> {
  return freePort();
}
