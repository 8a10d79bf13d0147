import { createServer, type Server, type TLSSocket } from "node:tls";
import type { ServerCertificate } from "../../helpers/tls.js";

/**
 * An HTTPS upstream written on raw TLS so it can be rude in ways `node:http` won't: it keeps
 * connections alive without ever saying for how long (no `Keep-Alive: timeout=` hint), then
 * closes each one after a short, random idle time. Each request (bodies framed by
 * Content-Length only) gets `200 ok`.
 *
 * The keep-alive race — the server's FIN still in flight when the client reuses the connection
 * — has a window of microseconds on loopback, so it is modelled directly: when the idle timer
 * fires the connection is doomed, its FIN "in flight" for `finInFlightMs`; a request arriving
 * in that window sees the connection die unanswered, as the client would on a real network.
 */

export interface RacyUpstream {
  origin: string;
  /** Requests answered. */
  answered(): number;
  /** TLS connections accepted. */
  connections(): number;
  /** Connections this server closed while idle. */
  idleCloses(): number;
  /** Requests that arrived on a doomed connection and got a reset (the race, lost). */
  racesLost(): number;
  /** Connections still open. */
  openSockets(): number;
  close(): Promise<void>;
}

export interface RacyUpstreamOptions {
  cert: ServerCertificate;
  /** Idle time before a silent close, drawn uniformly in [min, max] ms. */
  idleCloseMs: [number, number];
  /** How long the FIN is "in flight" after the idle timer fired. Default 30 ms. */
  finInFlightMs?: number;
  /** Answer each request after this long (keeps concurrent requests on separate connections). */
  responseDelayMs?: number;
}

export async function startRacyUpstream(options: RacyUpstreamOptions): Promise<RacyUpstream> {
  const sockets = new Set<TLSSocket>();
  let answered = 0;
  let connections = 0;
  let idleCloses = 0;
  let racesLost = 0;
  const [minMs, maxMs] = options.idleCloseMs;
  const finInFlightMs = options.finInFlightMs ?? 30;
  const server: Server = createServer(
    { cert: options.cert.certPem, key: options.cert.keyPem },
    (socket) => {
      connections++;
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => {});
      let buffered = "";
      let idleTimer: NodeJS.Timeout | undefined;
      let doomed = false;
      const armIdleClose = () => {
        idleTimer = setTimeout(
          () => {
            idleCloses++;
            doomed = true;
            idleTimer = setTimeout(() => socket.end(), finInFlightMs);
          },
          minMs + Math.random() * (maxMs - minMs),
        );
      };
      socket.on("close", () => clearTimeout(idleTimer));
      let pending = 0;
      let scheduled = false;
      const answer = () => {
        scheduled = false;
        if (socket.destroyed) return;
        for (; pending > 0; pending--) {
          answered++;
          socket.write(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nok",
          );
        }
        armIdleClose();
      };
      socket.on("data", (chunk: Buffer) => {
        clearTimeout(idleTimer);
        if (doomed) {
          // The request crossed our FIN: the client sees the connection die, no response.
          racesLost++;
          socket.destroy();
          return;
        }
        buffered += chunk.toString("latin1");
        for (;;) {
          const end = buffered.indexOf("\r\n\r\n");
          if (end === -1) break;
          const length = Number(
            /\r\ncontent-length:\s*(\d+)/i.exec(buffered.slice(0, end))?.[1] ?? 0,
          );
          if (buffered.length < end + 4 + length) break;
          buffered = buffered.slice(end + 4 + length);
          pending++;
        }
        if (pending > 0 && !scheduled) {
          scheduled = true;
          setTimeout(answer, options.responseDelayMs ?? 0);
        }
      });
    },
  );
  server.on("tlsClientError", () => {});
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    origin: `https://127.0.0.1:${port}`,
    answered: () => answered,
    connections: () => connections,
    idleCloses: () => idleCloses,
    racesLost: () => racesLost,
    openSockets: () => sockets.size,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
