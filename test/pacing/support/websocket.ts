import type { IncomingHttpHeaders } from "node:http";
import { WebSocket } from "ws";
import { maxInAnyWindow } from "../../helpers/limited-upstream.js";
import type { ServerCertificate } from "../../helpers/tls.js";
import { startWsUpstream, type WsUpstream } from "../../protocol/ws-upstream.js";

/**
 * What the WebSocket pacing tests share: a real `ws` upstream behind TLS that enforces its limit
 * on handshakes the way test/helpers/limited-upstream.ts does on requests (at most `limit` in
 * any rolling window, 429 beyond), and a `ws` client whose handshake reports what it got.
 */
export interface LimitedWsUpstream {
  ws: WsUpstream;
  origin: string;
  /** Arrival time (performance.now ms) of every handshake, accepted or not. */
  arrivals: number[];
  /** Handshakes answered 101. */
  accepted(): number;
  /** Handshakes answered 429. */
  rejected(): number;
  /** The most handshakes that arrived within any window of `windowMs` (default the limit's). */
  maxInAnyWindow(windowMs?: number): number;
  close(): Promise<void>;
}

export async function startLimitedWsUpstream(options: {
  cert: ServerCertificate;
  limit: number;
  windowMs?: number;
}): Promise<LimitedWsUpstream> {
  const windowMs = options.windowMs ?? 1_000;
  const arrivals: number[] = [];
  /** Accepted handshakes still inside the window, oldest first. */
  const inWindow: number[] = [];
  let accepted = 0;
  let rejected = 0;
  const ws = await startWsUpstream({
    cert: options.cert,
    authorize: () => {
      const nowMs = performance.now();
      arrivals.push(nowMs);
      while (inWindow.length > 0 && inWindow[0]! <= nowMs - windowMs) inWindow.shift();
      if (inWindow.length >= options.limit) {
        rejected++;
        return 429;
      }
      inWindow.push(nowMs);
      accepted++;
      return true;
    },
  });
  return {
    ws,
    origin: ws.origin,
    arrivals,
    accepted: () => accepted,
    rejected: () => rejected,
    maxInAnyWindow: (w = windowMs) => maxInAnyWindow(arrivals, w),
    close: () => ws.close(),
  };
}

/** How a client's handshake ended. */
export interface Handshake {
  /** 101, or the status of the answer that came instead. */
  status: number;
  headers: IncomingHttpHeaders;
  /** The refusal's body ("" after a 101). */
  text: string;
  /** performance.now() when the answer arrived. */
  atMs: number;
  /** The open connection after a 101. */
  socket: WebSocket | undefined;
}

export interface HandshakeOptions {
  /** Source address of the connection (127.0.0.x): the peer a `by: caller` budget sees. */
  localAddress?: string;
  headers?: Record<string, string>;
}

/** Opens a WebSocket through the proxy; resolves with the 101 or whatever came instead. */
export function handshake(url: string, options: HandshakeOptions = {}): Promise<Handshake> {
  return new Promise((resolve, reject) => {
    let headers: IncomingHttpHeaders = {};
    const ws = new WebSocket(url, {
      headers: options.headers,
      perMessageDeflate: false,
      localAddress: options.localAddress ?? "127.0.0.1",
    });
    ws.on("upgrade", (res) => {
      headers = res.headers;
    });
    ws.on("open", () =>
      resolve({ status: 101, headers, text: "", atMs: performance.now(), socket: ws }),
    );
    ws.on("error", reject);
    ws.on("unexpected-response", (_req, res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        text += chunk;
      });
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          text,
          atMs: performance.now(),
          socket: undefined,
        }),
      );
    });
  });
}

/** `count` handshakes at once. */
export function handshakes(
  url: string,
  count: number,
  options: HandshakeOptions = {},
): Promise<Handshake[]> {
  return Promise.all(Array.from({ length: count }, () => handshake(url, options)));
}

/** Ends every connection a 101 opened. */
export function closeAll(answers: readonly Handshake[]): void {
  for (const answer of answers) answer.socket?.terminate();
}
