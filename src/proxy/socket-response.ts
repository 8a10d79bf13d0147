/**
 * HTTP answers on a connection Node has handed over (the server's `upgrade` event): Node's parser
 * is gone and no ServerResponse exists, so one is made here. Everything that answers a normal
 * request (sendProxyError, the exchange in exchange/) then works on it unchanged, framing
 * included; the connection is closed once the answer is written, as there is no parser left to
 * read a next request.
 */

import type { Socket } from "node:net";
import { type IncomingMessage, ServerResponse } from "../net/node-http.js";

/** What Node keeps on a socket while one of its responses is being written. */
type ServerSocket = Socket & { _httpMessage?: ServerResponse | null };

/** A response written straight onto `socket`, ending the connection when finished. */
export function responseOnSocket(req: IncomingMessage, socket: Socket): ServerResponse {
  const res = new ServerResponse(req);
  // Adds `Connection: close`; there is no parser left for a next request.
  res.shouldKeepAlive = false;
  res.assignSocket(socket);
  res.once("finish", () => {
    res.detachSocket(socket);
    // end() once the answer is flushed, then destroy (Node's server does the same).
    socket.destroySoon();
  });
  return res;
}

/**
 * Calls `ready` once no earlier response is being written on this connection. A client may
 * pipeline an Upgrade request behind others: Node hands it over at once, while the earlier
 * answers are still being written, and a 101 written then would land in the middle of them.
 */
export function whenConnectionIdle(socket: Socket, ready: () => void): void {
  const current = (socket as ServerSocket)._httpMessage;
  if (!current || socket.destroyed) {
    ready();
    return;
  }
  // A response emits 'close' after 'finish' (or when the connection dies); the next queued one
  // is assigned to the socket by then, so look again on the next turn.
  current.once("close", () => setImmediate(() => whenConnectionIdle(socket, ready)));
}

/** What a client may send ahead of its 101, kept for the upstream; past it, reading stops. */
const EARLY_BYTES_LIMIT = 64 * 1024;

export interface HangUpWatch {
  /**
   * Stops watching (the 101 came) and returns what the client sent past its request head, `head`
   * first, for the relay. The socket is left paused.
   */
  release(): Buffer;
}

/**
 * Notices a client that hangs up while its Upgrade request waits (for a token, a turn from the
 * pacer, the upstream's answer). Node stops reading a connection it hands over, so a FIN would
 * go unseen until the relay starts: the wait would hold its place (a turn, a slot in
 * `maxUpgrades`) for a client long gone. Reading it meanwhile, an end is a hang-up, as Node's
 * server takes one before its answer (`httpAllowHalfOpen` off): `onHangUp` runs; a reset now
 * shows too, as the socket's 'error' and 'close'. Bytes the client sent early are kept; past
 * EARLY_BYTES_LIMIT reading stops, and with it the watch.
 */
export function watchForHangUp(socket: Socket, head: Buffer, onHangUp: () => void): HangUpWatch {
  const early: Buffer[] = [head];
  let size = head.length;
  const onData = (chunk: Buffer) => {
    early.push(chunk);
    size += chunk.length;
    if (size > EARLY_BYTES_LIMIT) stop();
  };
  const stop = () => {
    socket.pause();
    socket.removeListener("data", onData);
    socket.removeListener("end", onHangUp);
  };
  socket.on("data", onData);
  socket.on("end", onHangUp);
  return {
    release() {
      stop();
      return early.length === 1 ? head : Buffer.concat(early, size);
    },
  };
}
