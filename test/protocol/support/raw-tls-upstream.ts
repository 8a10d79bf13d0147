import { createServer, type Server, type TLSSocket } from "node:tls";
import type { ServerCertificate } from "../../helpers/tls.js";

/**
 * An HTTPS upstream written byte by byte: no HTTP library between the test and the wire, so a
 * test sees the exact request head the proxy sent (framing fields, trailers) and answers with
 * exactly the bytes it wants, when it wants (late bodies, interim responses, early closes).
 */

/** One request as it arrived: the head's text and a reader for whatever follows it. */
export interface RawUpstreamRequest {
  /** The request head up to (not including) the blank line, latin1. */
  head: string;
  /** Lowercase field name → values in order. */
  headers: Map<string, string[]>;
  socket: TLSSocket;
  /** Reads the body the head announces (Content-Length or chunked) with its trailer section. */
  readBody(): Promise<RawBody>;
}

export interface RawBody {
  body: Buffer;
  /** Framing the body actually came in. */
  framing: "content-length" | "chunked" | "none";
  /** Trailer fields of a chunked body, as raw lines. */
  trailers: string[];
}

export interface RawTlsUpstream {
  origin: string;
  port: number;
  /** Heads received, in order. */
  heads: string[];
  server: Server;
  close(): Promise<void>;
}

/**
 * Starts the server. `onRequest` runs for each request of a connection in turn; it must have
 * read the body (or closed the socket) when its promise settles.
 */
export async function startRawTlsUpstream(options: {
  cert: ServerCertificate;
  onRequest: (request: RawUpstreamRequest) => void | Promise<void>;
}): Promise<RawTlsUpstream> {
  const heads: string[] = [];
  const sockets = new Set<TLSSocket>();
  const server = createServer(
    { cert: options.cert.certPem, key: options.cert.keyPem },
    (socket) => {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      // A test that closes early provokes resets; they are the point, not a failure.
      socket.on("error", () => {});
      const reader = new SocketReader(socket);
      void (async () => {
        // Requests on one connection are handled one after the other (keep-alive).
        while (!socket.destroyed) {
          const head = await reader.readHead();
          if (head === undefined) return;
          heads.push(head);
          await options.onRequest(requestFrom(head, socket, reader));
        }
      })().catch(() => socket.destroy());
    },
  );
  server.on("tlsClientError", () => {});
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    origin: `https://127.0.0.1:${port}`,
    port,
    heads,
    server,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Lowercase name → values, from a head's field lines. */
export function parseHeadFields(head: string): Map<string, string[]> {
  const headers = new Map<string, string[]>();
  for (const line of head.split("\r\n").slice(1)) {
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const values = headers.get(name) ?? [];
    values.push(line.slice(colon + 1).trim());
    headers.set(name, values);
  }
  return headers;
}

function requestFrom(head: string, socket: TLSSocket, reader: SocketReader): RawUpstreamRequest {
  const headers = parseHeadFields(head);
  return {
    head,
    headers,
    socket,
    readBody: () => reader.readBody(headers),
  };
}

/** Pull-style reading of a socket: exact byte counts and lines, for HTTP/1.1 framing. */
class SocketReader {
  private buffered = Buffer.alloc(0);
  private ended = false;
  private wake: (() => void) | undefined;

  constructor(socket: TLSSocket) {
    socket.on("data", (chunk: Buffer) => {
      this.buffered = Buffer.concat([this.buffered, chunk]);
      this.wake?.();
    });
    const end = () => {
      this.ended = true;
      this.wake?.();
    };
    socket.on("end", end);
    socket.on("close", end);
  }

  private async more(): Promise<boolean> {
    if (this.ended) return false;
    await new Promise<void>((resolve) => {
      this.wake = resolve;
    });
    this.wake = undefined;
    return true;
  }

  /** Bytes up to `delimiter` (consumed, not returned), or undefined at end of stream. */
  async readUntil(delimiter: string): Promise<Buffer | undefined> {
    for (;;) {
      const at = this.buffered.indexOf(delimiter, 0, "latin1");
      if (at !== -1) {
        const out = this.buffered.subarray(0, at);
        this.buffered = this.buffered.subarray(at + delimiter.length);
        return out;
      }
      if (!(await this.more())) return undefined;
    }
  }

  async readExactly(length: number): Promise<Buffer> {
    while (this.buffered.length < length) {
      if (!(await this.more())) throw new Error("connection ended inside a body");
    }
    const out = this.buffered.subarray(0, length);
    this.buffered = this.buffered.subarray(length);
    return out;
  }

  async readHead(): Promise<string | undefined> {
    return (await this.readUntil("\r\n\r\n"))?.toString("latin1");
  }

  async readBody(headers: Map<string, string[]>): Promise<RawBody> {
    const te = headers.get("transfer-encoding");
    if (te?.join(",").toLowerCase().includes("chunked")) {
      const parts: Buffer[] = [];
      for (;;) {
        const sizeLine = (await this.readUntil("\r\n"))?.toString("latin1");
        if (sizeLine === undefined) throw new Error("connection ended inside a chunked body");
        const size = Number.parseInt(sizeLine.split(";")[0]!, 16);
        if (size === 0) break;
        parts.push(await this.readExactly(size));
        await this.readExactly(2);
      }
      const trailers: string[] = [];
      for (;;) {
        const line = (await this.readUntil("\r\n"))?.toString("latin1");
        if (line === undefined || line === "") break;
        trailers.push(line);
      }
      return { body: Buffer.concat(parts), framing: "chunked", trailers };
    }
    const length = headers.get("content-length")?.[0];
    if (length !== undefined) {
      return {
        body: await this.readExactly(Number(length)),
        framing: "content-length",
        trailers: [],
      };
    }
    return { body: Buffer.alloc(0), framing: "none", trailers: [] };
  }
}
