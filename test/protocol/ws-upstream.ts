import type { IncomingMessage } from "node:http";
import { createServer, type Server } from "node:https";
import type { Socket } from "node:net";
import { type WebSocket, WebSocketServer } from "ws";
import type { ServerCertificate } from "../helpers/tls.js";

/**
 * A real WebSocket server (the `ws` package) behind real TLS, for the upgrade tests: it echoes
 * every message, records the handshake requests it saw (raw header lists) and the close codes
 * its connections ended with. `authorize` decides per handshake: true accepts, a number answers
 * that status instead of 101 (with a JSON body and an `x-upstream-reason` header).
 */
export interface WsUpstream {
  origin: string;
  /** Handshake requests that reached the server, in order. */
  handshakes: { url: string; headers: [string, string][] }[];
  /** Server-side connections, in accept order. */
  connections: WebSocket[];
  /** Close events seen on the server side: code and reason. */
  closes: { code: number; reason: string }[];
  /** TLS sockets currently open to the server. */
  openSockets(): number;
  server: Server;
  close(): Promise<void>;
}

export interface WsUpstreamOptions {
  cert: ServerCertificate;
  authorize?: (req: IncomingMessage) => true | number;
}

export async function startWsUpstream(options: WsUpstreamOptions): Promise<WsUpstream> {
  const handshakes: WsUpstream["handshakes"] = [];
  const connections: WebSocket[] = [];
  const closes: WsUpstream["closes"] = [];
  const sockets = new Set<Socket>();
  const server = createServer({ cert: options.cert.certPem, key: options.cert.keyPem });
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  const wss = new WebSocketServer({
    server,
    verifyClient: (info, done) => {
      const req = info.req;
      const headers: [string, string][] = [];
      for (let i = 0; i < req.rawHeaders.length; i += 2) {
        headers.push([req.rawHeaders[i]!, req.rawHeaders[i + 1]!]);
      }
      handshakes.push({ url: req.url ?? "", headers });
      const verdict = options.authorize?.(req) ?? true;
      if (verdict === true) done(true);
      else
        done(false, verdict, "Refused", {
          "content-type": "application/json",
          "x-upstream-reason": `status-${verdict}`,
        });
    },
  });
  wss.on("headers", (headers) => headers.push("X-Upstream-Handshake: yes"));
  wss.on("connection", (ws) => {
    connections.push(ws);
    ws.on("message", (data, isBinary) => ws.send(data, { binary: isBinary }));
    ws.on("close", (code, reason) => closes.push({ code, reason: reason.toString() }));
    ws.on("error", () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    origin: `https://127.0.0.1:${port}`,
    handshakes,
    connections,
    closes,
    openSockets: () => sockets.size,
    server,
    async close() {
      for (const ws of wss.clients) ws.terminate();
      for (const socket of sockets) socket.destroy();
      wss.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * The rest of a raw WebSocket handshake after its request line (RFC 6455 §4.1, with the RFC's
 * sample key), ending the head: `GET /path HTTP/1.1\r\n${HANDSHAKE}`.
 */
export const HANDSHAKE =
  "Host: 127.0.0.1\r\n" +
  "Connection: Upgrade\r\n" +
  "Upgrade: websocket\r\n" +
  "Sec-WebSocket-Version: 13\r\n" +
  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";

/** Header values by lowercase name. */
export function headerValues(headers: [string, string][], name: string): string[] {
  return headers.filter(([n]) => n.toLowerCase() === name).map(([, v]) => v);
}

/** Resolves once `check` holds, polling; rejects after `timeoutMs`. */
export async function eventually(
  check: () => boolean,
  timeoutMs = 5_000,
  what = "condition",
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
