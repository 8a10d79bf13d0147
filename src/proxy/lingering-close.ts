/**
 * Lingering close (RFC 9112 §9.6; nginx `lingering_close`, Apache `ap_lingering_close`).
 *
 * When the proxy answers before it has read the whole request body (an upstream's early
 * 401/411/413, a body limit) the response carries `Connection: close`, and Node's server closes
 * the socket once the answer is flushed (`resOnFinish` → `socket.destroySoon()`: end, then
 * destroy on 'finish'). The socket still holds unread body bytes, and closing a TCP socket with
 * unread bytes makes the kernel send a RST instead of waiting; a client still uploading then
 * fails its next write with EPIPE/ECONNRESET and never reads the answer already on the wire
 * (`curl: (55) Send failure: Broken pipe`, Python's `BrokenPipeError`).
 *
 * So on the proxy listener `destroySoon` lingers instead: half-close (our FIN follows the
 * answer), stop parsing — later bytes are the rest of a body nobody will read, never a new
 * request — read and discard what the client still sends, and destroy once the client closes
 * or a bound below is reached. Only a connection closed while a request body is still arriving
 * lingers (see bodyLeftUnread); every other close is Node's as before.
 */
import type { Socket } from "node:net";

/** Bounds of one lingering close; whichever is reached first ends it. */
export interface LingerLimits {
  /** Longest silence from the client (nginx `lingering_timeout`). */
  idleMs: number;
  /** Longest linger in all (nginx `lingering_time`). */
  totalMs: number;
  /** Most bytes read and discarded. */
  maxBytes: number;
}

/**
 * - idle 2 s: a client still uploading sends every few milliseconds, one that has read the
 *   answer closes at once; the races this prevents last milliseconds even on a loaded machine.
 *   Beyond 2 s of silence the client is stalled and only holds a descriptor (nginx: 5 s, for
 *   WAN clients).
 * - total 10 s and 64 MiB: a client that writes its whole body before reading (Python's
 *   http.client, many scripts) reads the answer only once the upload is done, so the linger
 *   must absorb the rest of a typical upload (tens of MiB at LAN speed in well under 10 s);
 *   past that, the bandwidth and CPU spent on bytes we throw away buy too little (nginx: 30 s,
 *   no byte cap).
 */
export const LINGER_LIMITS: Readonly<LingerLimits> = Object.freeze({
  idleMs: 2_000,
  totalMs: 10_000,
  maxBytes: 64 * 1024 * 1024,
});

export interface LingeringClose {
  /** Makes the close Node's server performs after a `Connection: close` answer linger. */
  watch(socket: Socket): void;
  /** Sockets lingering right now (they still count as the server's connections). */
  count(): number;
  /** Ends every linger now: the server's shutdown grace is over. */
  destroyAll(): void;
}

const kLingering = Symbol("bearer-proxy.lingering");

/**
 * What Node's HTTP server keeps on a connection's socket: its parser (null once the connection
 * is handed over for an Upgrade) and the request the parser is reading (kept until its body
 * has been read to the end).
 */
type LingerSocket = Socket & {
  destroySoon?: () => void;
  parser?: { incoming?: { complete: boolean } | null } | null;
  [kLingering]?: true;
};

/**
 * Node's server closes after an answer while a request body is still arriving: the client may
 * still be sending it. Only then — every other close stays as it was, and a connection handed
 * over for an Upgrade is its relay's to close. (The body is nearly always the answered
 * request's own; if it is one pipelined behind an answer that closes the connection, that
 * request is doomed either way — Node writes nothing after a `Connection: close` answer — and
 * now ends with the linger instead of at once.)
 */
function bodyLeftUnread(socket: LingerSocket): boolean {
  const incoming = socket.parser?.incoming;
  return (
    incoming != null &&
    !incoming.complete &&
    socket.readable &&
    socket.writable &&
    !socket.destroyed
  );
}

/** True while `socket` is lingering: whatever it still sends is discarded, never parsed. */
export function isLingering(socket: unknown): boolean {
  return (socket as LingerSocket)[kLingering] === true;
}

export function createLingeringClose(limits: LingerLimits = LINGER_LIMITS): LingeringClose {
  const lingering = new Set<Socket>();

  function linger(socket: LingerSocket): void {
    socket[kLingering] = true;
    lingering.add(socket);
    let discarded = 0;
    const stop = () => socket.destroy();
    const idle = setTimeout(stop, limits.idleMs);
    const total = setTimeout(stop, limits.totalMs);
    idle.unref();
    total.unref();
    socket.once("close", () => {
      clearTimeout(idle);
      clearTimeout(total);
      lingering.delete(socket);
    });
    // Our FIN goes after the answer; the receive side stays open.
    socket.end();
    // Node's HTTP parser stops here. Adding a 'data' listener makes Node's server stop feeding
    // the parser from the handle (the `unconsume` in its socket listener wrapper) — the same
    // hand-over it does for an upgrade — and without its own 'data' listener nothing is parsed.
    socket.removeAllListeners("data");
    socket.on("data", (chunk: Buffer) => {
      discarded += chunk.length;
      if (discarded > limits.maxBytes) stop();
      else idle.refresh();
    });
    // The client finished sending (it has read the answer, or gave up): nothing more to wait for.
    socket.on("end", stop);
    socket.on("error", stop);
    // The request body stream may have paused the socket (backpressure from an upstream that
    // stopped reading): the unread bytes are the very ones to drain.
    socket.resume();
    // The stream may already count as flowing while its handle is stopped: Node's server stops
    // the handle itself while it feeds the parser, and a resume the request asked for just before
    // (`req._dump()` when nobody read the body) lost its listener to the unconsume above.
    // `_read` starts the handle if, and only if, it isn't reading.
    (socket as Socket & { _read(size: number): void })._read(0);
  }

  return {
    watch(socket) {
      const s = socket as LingerSocket;
      const plainDestroySoon = s.destroySoon;
      if (typeof plainDestroySoon !== "function") return;
      s.destroySoon = function lingeringDestroySoon(this: LingerSocket) {
        if (this[kLingering]) return;
        if (bodyLeftUnread(this)) linger(this);
        else plainDestroySoon.call(this);
      };
    },
    count: () => lingering.size,
    destroyAll() {
      for (const socket of lingering) socket.destroy();
    },
  };
}
