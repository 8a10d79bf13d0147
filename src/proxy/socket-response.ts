/**
 * HTTP answers on a connection Node has handed over (the server's `upgrade` event): Node's parser
 * is gone and no ServerResponse exists, so one is made here. Everything that answers a normal
 * request (sendProxyError, the exchange in forward.ts) then works on it unchanged, framing
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
