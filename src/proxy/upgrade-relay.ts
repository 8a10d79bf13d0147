/**
 * After a 101: the client is told the protocol switched, then bytes go both ways untouched, with
 * backpressure (pipe pauses the reader while the other side's buffer is full), an idle timeout,
 * and both sides closed together — an end (FIN) is passed on as an end once the data before it
 * is written; a reset or an error on either side destroys both.
 */
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { firstFieldValue, type RawHeaders } from "../net/raw-headers.js";
import { clientResponseHeaders } from "./response-headers.js";

/** How an upgraded connection ended. */
export interface RelayOutcome {
  /** Bytes from the client to the upstream (the bytes sent with the request included). */
  bytesIn: number;
  /** Bytes from the upstream to the client after the 101. */
  bytesOut: number;
  /** Why it ended, when not by an orderly close. */
  reason: "idle" | "client_error" | "upstream_error" | "shutdown" | undefined;
  /** The socket error behind `reason`, for a debug log. */
  cause: unknown;
}

export interface UpgradeRelay {
  /** Destroys both sides now (shutdown). */
  destroy(): void;
}

/**
 * The 101 as the client gets it: the upstream's end-to-end fields (Sec-WebSocket-Accept,
 * -Protocol, -Extensions, Set-Cookie, …) in order, hop-by-hop ones dropped, then the
 * `Connection: upgrade` and `Upgrade` fields that this hop needs (RFC 9110 §7.8, §15.2.2).
 * `extra` is the proxy's own fields, name then value (the pacing gate's RateLimit fields).
 */
export function switchingProtocolsHead(
  rawHeaders: RawHeaders,
  extra: readonly string[] = [],
): string {
  const upgrade = firstFieldValue(rawHeaders, "upgrade");
  const fields = clientResponseHeaders(rawHeaders, false);
  fields.push(...extra);
  let head = "HTTP/1.1 101 Switching Protocols\r\n";
  for (let i = 0; i < fields.length; i += 2) head += `${fields[i]}: ${fields[i + 1]}\r\n`;
  head += "connection: upgrade\r\n";
  if (upgrade !== undefined) head += `upgrade: ${upgrade}\r\n`;
  return `${head}\r\n`;
}

export interface RelayOptions {
  client: Socket;
  upstream: Duplex;
  /** Client bytes Node read past the request head; sent upstream first. */
  clientHead: Buffer;
  /** No byte either way for this long closes both sides. */
  idleMs: number;
  onClose(outcome: RelayOutcome): void;
}

/** Writes nothing itself: the caller has sent the 101. Starts piping both ways. */
export function relayUpgraded(options: RelayOptions): UpgradeRelay {
  const { client, upstream, clientHead } = options;
  let bytesIn = clientHead.length;
  let bytesOut = 0;
  let reason: RelayOutcome["reason"];
  let cause: unknown;
  let open = 2;
  let ended = false;

  const destroyBoth = () => {
    client.destroy();
    upstream.destroy();
  };
  const idle = setTimeout(() => {
    reason ??= "idle";
    destroyBoth();
  }, options.idleMs);
  // The timer must not keep a draining process alive on its own.
  idle.unref();

  const closed = () => {
    open--;
    if (open > 0 || ended) return;
    ended = true;
    clearTimeout(idle);
    options.onClose({ bytesIn, bytesOut, reason, cause });
  };
  const watch = (side: Duplex, other: Duplex, failure: "client_error" | "upstream_error") => {
    side.on("error", (err) => {
      reason ??= failure;
      cause ??= err;
      destroyBoth();
    });
    // The other side still flushes what it holds, then ends; a stuck peer meets the idle timer.
    side.once("close", () => {
      if (other.destroyed) {
        // nothing left to flush
      } else if (typeof (other as Partial<Socket>).destroySoon === "function") {
        (other as Socket).destroySoon();
      } else {
        other.end();
      }
      closed();
    });
  };
  watch(client, upstream, "client_error");
  watch(upstream, client, "upstream_error");

  // Node's server may have left a keep-alive timeout on the connection; ours governs now.
  client.setTimeout(0);
  if (clientHead.length > 0) upstream.write(clientHead);
  client.pipe(upstream);
  upstream.pipe(client);
  client.on("data", (chunk: Buffer) => {
    bytesIn += chunk.length;
    idle.refresh();
  });
  upstream.on("data", (chunk: Buffer) => {
    bytesOut += chunk.length;
    idle.refresh();
  });

  return {
    destroy() {
      reason ??= "shutdown";
      destroyBoth();
    },
  };
}
