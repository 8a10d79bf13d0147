/**
 * Turns a forwarded request into an Upgrade request without a second copy of the exchange logic:
 * forward.ts's Exchange dispatches through this wrapper, which adds undici's `upgrade` option to
 * every attempt (the first one, the replay after a 401 and the retry after a reset) and hands a
 * 101's socket to `onUpgrade`. Any other answer reaches the Exchange as a normal response, so the
 * 401 replay, error mapping and response relay are forward.ts's own.
 *
 * undici (client-h1) calls `onUpgrade(statusCode, rawHeaders, socket)` with the TLS socket
 * detached from its pool: its parser and listeners removed, the bytes read after the 101 put
 * back with `unshift`. The socket is ours from then on.
 */
import type { Duplex } from "node:stream";
import type { Dispatcher } from "undici";
import { Dispatcher as DispatcherBase } from "../net/undici-core.js";

/** Receives the upstream's 101: its raw header list and the connection. */
export type UpgradeListener = (
  statusCode: number,
  rawHeaders: readonly (Buffer | string)[],
  socket: Duplex,
) => void;

export class UpgradeDispatcher extends DispatcherBase {
  /** Requests dispatched so far (1 + replays and retries). */
  attempts = 0;
  /** Authorization values sent, in order (a change means the 401 replay happened). */
  private readonly authorizations = new Set<string>();

  constructor(
    private readonly inner: Dispatcher,
    /** The Upgrade value sent (the client's, minus protocols not allowed). */
    private readonly protocol: string,
    private readonly authorizationIndex: number,
    private readonly onUpgrade: UpgradeListener,
  ) {
    super();
  }

  /** True once the request was sent again with another token (the 401 replay). */
  get replayed(): boolean {
    return this.authorizations.size > 1;
  }

  override dispatch(
    options: Dispatcher.DispatchOptions,
    handler: Dispatcher.DispatchHandler,
  ): boolean {
    this.attempts++;
    const headers = options.headers as string[];
    this.authorizations.add(headers[this.authorizationIndex] ?? "");
    const onUpgrade = this.onUpgrade;
    // The legacy callback API, as the Exchange speaks it; only onUpgrade is ours.
    const legacy = handler as Required<
      Pick<Dispatcher.DispatchHandler, "onConnect" | "onHeaders" | "onData" | "onComplete">
    > &
      Pick<Dispatcher.DispatchHandler, "onError">;
    return this.inner.dispatch(
      { ...options, upgrade: this.protocol },
      {
        onConnect: (abort) => legacy.onConnect(abort),
        onHeaders: (statusCode, rawHeaders, resume, statusText) =>
          legacy.onHeaders(statusCode, rawHeaders, resume, statusText),
        onData: (chunk) => legacy.onData(chunk),
        onComplete: (trailers) => legacy.onComplete(trailers),
        onError: (err) => legacy.onError?.(err),
        onUpgrade: (statusCode, rawHeaders, socket) =>
          onUpgrade(statusCode, (rawHeaders ?? []) as (Buffer | string)[], socket),
      },
    );
  }

  // The inner dispatcher is shared and closed by its owner (the dispatcher pool).
  override close(): Promise<void> {
    return Promise.resolve();
  }

  override destroy(): Promise<void> {
    return Promise.resolve();
  }
}
