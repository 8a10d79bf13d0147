/**
 * Pipelined requests on one connection are forwarded one after the other, as the client sent
 * them (Node emits them all at once): the upstream sees them in order, never in parallel.
 *
 * Hostile input must not turn this into a weapon (issue 14):
 * - the queue is drained by a loop, never by recursion: thousands of queued requests finishing
 *   synchronously (their client gone) would otherwise blow the stack;
 * - it is bounded: at `maxPipelinedRequests` queued behind the one in flight, the connection
 *   stops being read (TCP backpressure) until the queue is below the limit again. Requests that
 *   arrived in the same read as the one that filled the queue are still queued (Node's parser
 *   handles a whole read at once), so the bound is the limit plus one read (≤ 64 KiB of bytes);
 * - when the connection closes the whole queue is dropped at once: nothing queued is handled.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";

export type QueuedHandler = (req: IncomingMessage, res: ServerResponse) => void;

export interface ConnectionQueue {
  /** Runs `handle` now, or after the connection's earlier requests finished. */
  enqueue(req: IncomingMessage, res: ServerResponse): void;
  /** The request on `req`'s connection finished: start the next one. */
  next(req: IncomingMessage): void;
}

/** One connection's queue. */
interface Connection {
  socket: Socket;
  /** A request of this connection is being handled. */
  busy: boolean;
  /** Set while the drain loop runs, so a synchronous `next` doesn't start a second loop. */
  draining: boolean;
  /** Set when we stopped reading the socket because the queue is full. */
  pausedByUs: boolean;
  closed: boolean;
  queue: (IncomingMessage | ServerResponse)[];
  /** Index of the next queued request's `req` in `queue` (pairs of req, res). */
  head: number;
}

/** Handled entries are cut off the queue's front once there are this many. */
const COMPACT_AT = 256;

const kConnection = Symbol("bearer-proxy.connection-queue");
type PipelinedSocket = Socket & { [kConnection]?: Connection };

export function createConnectionQueue(
  handle: QueuedHandler,
  maxPipelinedRequests: number,
): ConnectionQueue {
  function connectionOf(socket: PipelinedSocket): Connection {
    let connection = socket[kConnection];
    if (connection) return connection;
    const created: Connection = {
      socket,
      busy: false,
      draining: false,
      pausedByUs: false,
      closed: false,
      queue: [],
      head: 0,
    };
    socket[kConnection] = created;
    socket.once("close", () => {
      created.closed = true;
      created.queue = [];
      created.head = 0;
    });
    // Node resumes a socket on its own (after a response, to dump an unread body): keep it
    // stopped while the queue is full.
    socket.on("resume", () => {
      if (created.pausedByUs && queued(created) >= maxPipelinedRequests) socket.pause();
    });
    connection = created;
    return connection;
  }

  const queued = (c: Connection) => (c.queue.length - c.head) / 2;

  /** Runs queued requests until one is still being handled or the queue is empty. */
  function drain(c: Connection): void {
    if (c.draining) return;
    c.draining = true;
    try {
      while (!c.busy && c.head < c.queue.length) {
        const req = c.queue[c.head] as IncomingMessage;
        const res = c.queue[c.head + 1] as ServerResponse;
        c.head += 2;
        if (c.head === c.queue.length) {
          c.queue = [];
          c.head = 0;
        } else if (c.head >= COMPACT_AT) {
          c.queue = c.queue.slice(c.head);
          c.head = 0;
        }
        if (c.pausedByUs && queued(c) < maxPipelinedRequests) {
          c.pausedByUs = false;
          // Node pauses a socket itself while responses can't be written (`_paused`, resumed
          // on its 'drain'): leave that to Node.
          if (!(c.socket as Socket & { _paused?: boolean })._paused) c.socket.resume();
        }
        // A queued request whose client is gone: nothing to answer.
        if (c.closed || c.socket.destroyed) continue;
        c.busy = true;
        handle(req, res);
      }
    } finally {
      c.draining = false;
    }
  }

  return {
    enqueue(req, res) {
      const c = connectionOf(req.socket as PipelinedSocket);
      if (c.closed) return;
      // The usual case, a connection with nothing queued and nothing in flight: no queue.
      if (!c.busy && c.head === c.queue.length && !c.socket.destroyed) {
        c.busy = true;
        handle(req, res);
        return;
      }
      c.queue.push(req, res);
      if (c.busy && queued(c) >= maxPipelinedRequests && !c.pausedByUs) {
        c.pausedByUs = true;
        c.socket.pause();
      }
      drain(c);
    },
    next(req) {
      const c = (req.socket as PipelinedSocket)[kConnection];
      if (!c) return;
      c.busy = false;
      drain(c);
    },
  };
}
