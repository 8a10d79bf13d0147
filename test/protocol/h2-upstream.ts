import { createHash } from "node:crypto";
import {
  constants,
  createSecureServer,
  type Http2SecureServer,
  type Http2ServerRequest,
  type Http2ServerResponse,
  type ServerHttp2Session,
} from "node:http2";
import type { TLSSocket } from "node:tls";
import type { ServerCertificate } from "../helpers/tls.js";

/**
 * A real HTTP/2 server (node:http2 over TLS) as the proxy's upstream. With `allowHTTP1: false`
 * it speaks nothing but h2, so a request that reaches it went over HTTP/2. Records request
 * headers and the HTTP version, counts TLS handshakes and sessions.
 *
 * Routes: `/echo…` JSON {method, url, httpVersion, headers, bodyLength, bodySha256};
 * `/download/<n>` n bytes streamed with backpressure; `/once-401/…` 401 to the Authorization seen
 * first on that path, 200 to any other; `/reset` the stream is reset before any
 * answer; `/slow/<ms>` answers after ms; `/barrier/<n>` answers once n requests are in flight
 * together (or after 2 s) with how many were; anything else 404.
 */
export interface H2Upstream {
  origin: string;
  server: Http2SecureServer;
  requests: { url: string; httpVersion: string; headers: Record<string, string | string[]> }[];
  tlsHandshakes(): number;
  sessions(): number;
  close(): Promise<void>;
}

const PATTERN = Buffer.alloc(64 * 1024, "0123456789abcdef");

export async function startH2Upstream(options: {
  cert: ServerCertificate;
  allowHTTP1?: boolean;
}): Promise<H2Upstream> {
  const requests: H2Upstream["requests"] = [];
  const firstAuthorization = new Map<string, string>();
  const barrier: Http2ServerResponse[] = [];
  let handshakes = 0;
  let sessions = 0;
  const server = createSecureServer({
    cert: options.cert.certPem,
    key: options.cert.keyPem,
    allowHTTP1: options.allowHTTP1 ?? false,
  });
  server.on("secureConnection", (_socket: TLSSocket) => handshakes++);
  const open = new Set<ServerHttp2Session>();
  server.on("session", (session: ServerHttp2Session) => {
    sessions++;
    open.add(session);
    session.on("close", () => open.delete(session));
  });
  server.on("request", (req: Http2ServerRequest, res: Http2ServerResponse) => {
    const headers = { ...req.headers } as Record<string, string | string[]>;
    requests.push({ url: req.url, httpVersion: req.httpVersion, headers });
    const path = req.url.split("?")[0]!;
    if (path.startsWith("/echo")) {
      const hash = createHash("sha256");
      let bodyLength = 0;
      req.on("data", (chunk: Buffer) => {
        bodyLength += chunk.length;
        hash.update(chunk);
      });
      req.on("end", () => {
        const body = JSON.stringify({
          method: req.method,
          url: req.url,
          httpVersion: req.httpVersion,
          headers,
          bodyLength,
          bodySha256: hash.digest("hex"),
        });
        res.writeHead(200, { "content-type": "application/json", "x-upstream": "h2" });
        res.end(body);
      });
      return;
    }
    if (path.startsWith("/download/")) {
      let remaining = Number(path.slice("/download/".length));
      res.writeHead(200, {
        "content-type": "application/octet-stream",
        "content-length": remaining,
      });
      const pump = () => {
        while (remaining > 0) {
          const size = Math.min(remaining, PATTERN.length);
          remaining -= size;
          if (!res.write(PATTERN.subarray(0, size))) {
            res.once("drain", pump);
            return;
          }
        }
        res.end();
      };
      pump();
      return;
    }
    if (path.startsWith("/once-401/")) {
      // The first Authorization seen on this path is refused, any other accepted.
      const authorization = String(req.headers.authorization);
      const first = firstAuthorization.get(path) ?? authorization;
      firstAuthorization.set(path, first);
      if (authorization === first) {
        res.writeHead(401, { "www-authenticate": 'Bearer error="invalid_token"' });
        res.end();
        return;
      }
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("second token accepted");
      return;
    }
    if (path.startsWith("/barrier/")) {
      // Answers once `n` requests are in flight together (or after 2 s): how many there were.
      const n = Number(path.slice("/barrier/".length));
      req.resume();
      req.on("end", () => {
        barrier.push(res);
        const release = () => {
          const group = barrier.splice(0);
          for (const r of group) r.end(JSON.stringify({ together: group.length }));
        };
        if (barrier.length >= n) release();
        else setTimeout(release, 2_000).unref();
      });
      return;
    }
    if (path === "/reset") {
      req.stream.close(constants.NGHTTP2_INTERNAL_ERROR);
      return;
    }
    if (path.startsWith("/slow/")) {
      const timer = setTimeout(() => res.end("late"), Number(path.slice("/slow/".length)));
      res.on("close", () => clearTimeout(timer));
      return;
    }
    res.writeHead(404);
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    origin: `https://127.0.0.1:${port}`,
    server,
    requests,
    tlsHandshakes: () => handshakes,
    sessions: () => sessions,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // Open sessions keep the server open: end them.
      for (const session of open) session.destroy();
      await closed;
    },
  };
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
