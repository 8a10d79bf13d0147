import { type Server, type TLSSocket, createServer } from "node:tls";
import type { ServerCertificate } from "../../helpers/tls.js";

/**
 * An HTTPS upstream written on raw TLS so it can be rude in ways `node:http` won't: it keeps
 * connections alive without ever saying for how long (no `Keep-Alive: timeout=` hint), then
 * closes each one after a short, random idle time. A client that reuses a pooled connection
 * will sometimes write its request just as the server hangs up: the classic keep-alive race.
 * Requests must have no body; each gets `200 ok`.
 */

export interface RacyUpstream {
  origin: string;
  /** Requests answered. */
  answered(): number;
  /** TLS connections accepted. */
  connections(): number;
  /** Connections this server closed while idle (the race window). */
  idleCloses(): number;
  /** Connections still open. */
  openSockets(): number;
  close(): Promise<void>;
}

export interface RacyUpstreamOptions {
  cert: ServerCertificate;
  /** Idle time before a silent close, drawn uniformly in [min, max] ms. */
  idleCloseMs: [number, number];
}

export async function startRacyUpstream(options: RacyUpstreamOptions): Promise<RacyUpstream> {
  const sockets = new Set<TLSSocket>();
  let answered = 0;
  let connections = 0;
  let idleCloses = 0;
  const [minMs, maxMs] = options.idleCloseMs;
  const server: Server = createServer({ cert: options.cert.certPem, key: options.cert.keyPem }, (socket) => {
    connections++;
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
    let buffered = "";
    let idleTimer: NodeJS.Timeout | undefined;
    const armIdleClose = () => {
      idleTimer = setTimeout(
        () => {
          idleCloses++;
          socket.end();
        },
        minMs + Math.random() * (maxMs - minMs),
      );
    };
    socket.on("data", (chunk: Buffer) => {
      clearTimeout(idleTimer);
      buffered += chunk.toString("latin1");
      let end = buffered.indexOf("\r\n\r\n");
      while (end !== -1) {
        buffered = buffered.slice(end + 4);
        answered++;
        socket.write("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nok");
        end = buffered.indexOf("\r\n\r\n");
      }
      if (buffered === "") armIdleClose();
    });
  });
  server.on("tlsClientError", () => {});
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    origin: `https://127.0.0.1:${port}`,
    answered: () => answered,
    connections: () => connections,
    idleCloses: () => idleCloses,
    openSockets: () => sockets.size,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
