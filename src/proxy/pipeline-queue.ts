/**
 * Pipelined requests on one connection are forwarded one after the other, as the client sent
 * them (Node emits them all at once): the upstream sees them in order, never in parallel.
 */
import type { IncomingMessage, ServerResponse } from "node:http";

const kBusy = Symbol("bearer-proxy.busy");
const kQueue = Symbol("bearer-proxy.queue");
type PipelinedSocket = IncomingMessage["socket"] & {
  [kBusy]?: boolean;
  [kQueue]?: (() => void)[];
};

export type PipelinedHandler = (req: IncomingMessage, res: ServerResponse) => void;

export interface PipelineQueue {
  /** Runs `handle` now, or after the connection's earlier requests finished. */
  enqueue(req: IncomingMessage, res: ServerResponse): void;
  /** The request on `req`'s connection finished: start the next one. */
  next(req: IncomingMessage): void;
}

export function createPipelineQueue(handle: PipelinedHandler): PipelineQueue {
  function next(socket: PipelinedSocket): void {
    socket[kBusy] = false;
    const queued = socket[kQueue]?.shift();
    if (!queued) return;
    socket[kBusy] = true;
    queued();
  }
  function run(socket: PipelinedSocket, req: IncomingMessage, res: ServerResponse): void {
    if (socket.destroyed) {
      // A queued pipelined request whose client is gone: nothing to answer.
      next(socket);
      return;
    }
    handle(req, res);
  }
  return {
    enqueue(req, res) {
      const socket = req.socket as PipelinedSocket;
      if (socket[kBusy]) {
        const queue = socket[kQueue] ?? [];
        socket[kQueue] = queue;
        queue.push(() => run(socket, req, res));
        return;
      }
      socket[kBusy] = true;
      run(socket, req, res);
    },
    next: (req) => next(req.socket as PipelinedSocket),
  };
}
