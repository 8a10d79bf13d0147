/**
 * An upstream may answer before it has read the request body — 401, 411, 413 — and close the
 * connection at once. Its kernel then resets the connection (closing with unread data sends a
 * RST, RFC 2525 §2.17), so the proxy's next body write fails with ECONNRESET or EPIPE while the
 * complete answer still sits, unread, in the receive buffer.
 *
 * Node destroys a socket whose write fails, and destroying drops what was not read yet; undici
 * then fails the request with the write's error (its ECONNRESET leniency only applies once the
 * status line has been parsed). The client got a 502 `upstream_reset` for an upstream that had
 * answered (issue 15: 15–20% of 8 MiB uploads; every one when the upstream closes at once).
 *
 * RFC 9112 §9.5 asks a client sending a body to keep monitoring the connection for a response
 * and to stop sending when one arrives; curl does. So here a write the peer refused stops the
 * sending without failing the request, and the read side decides how it ends: the kernel
 * delivers what the upstream sent and then the reset (or EOF). A complete answer reaches undici's
 * parser and the client as usual; no answer at all still fails with the reset, as before. The
 * egress-proxy path (undici's ProxyAgent builds its own tunnel sockets) keeps undici's behaviour.
 */
import type { Socket } from "node:net";
import type { buildConnector as BuildConnector } from "undici";
import { buildConnector } from "./undici-core.js";

/** Write errors that mean "the peer has closed": its answer, if any, is still readable. */
const PEER_CLOSED = new Set(["ECONNRESET", "EPIPE"]);

type WriteCallback = (error?: Error | null) => void;

/**
 * Makes a write on `socket` that fails because the peer closed not destroy the socket. The
 * failed write is held, never completed: Node's Writable then sends nothing more, its buffer
 * fills and undici pauses the body — the client's upload stalls instead of being read into the
 * void — until the socket is destroyed (undici does it once the answer is complete, or on the
 * read side's reset or end).
 */
export function keepReadingAfterWriteReset(socket: Socket): void {
  const holdIfPeerClosed =
    (callback: WriteCallback): WriteCallback =>
    (error) => {
      const code = (error as NodeJS.ErrnoException | null | undefined)?.code;
      if (error && code && PEER_CLOSED.has(code) && !socket.destroyed) return;
      callback(error);
    };
  const write = socket._write;
  socket._write = function (chunk, encoding, callback) {
    write.call(this, chunk, encoding, holdIfPeerClosed(callback));
  };
  const writev = socket._writev;
  if (writev) {
    socket._writev = function (chunks, callback) {
      writev.call(this, chunks, holdIfPeerClosed(callback));
    };
  }
}

/**
 * undici's connector with {@link keepReadingAfterWriteReset} applied to every HTTP/1.1
 * connection (an HTTP/2 session owns its socket's writes and reports a reset per stream).
 * `allowH2` arrives per call from the Agent's options, so both ALPN variants are kept.
 */
export function createUpstreamConnector(
  options: BuildConnector.BuildOptions,
): BuildConnector.connector {
  const http1 = buildConnector(options);
  let withH2: BuildConnector.connector | undefined;
  return (connectOptions, callback) => {
    const allowH2 = (connectOptions as { allowH2?: boolean }).allowH2 === true;
    if (allowH2) withH2 ??= buildConnector({ ...options, allowH2 });
    const connect = allowH2 && withH2 ? withH2 : http1;
    return connect(connectOptions, (...args) => {
      const socket = args[1];
      if (socket && (socket as { alpnProtocol?: string | false }).alpnProtocol !== "h2") {
        keepReadingAfterWriteReset(socket);
      }
      callback(...args);
    });
  };
}
