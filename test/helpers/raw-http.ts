import { connect, type Socket } from "node:net";

/**
 * A raw TCP client for framing tests: writes exact bytes (nothing normalised, unlike any HTTP
 * client) and reports every byte that came back and whether the server closed the connection.
 */

export interface RawExchange {
  /** Everything the server sent, latin1-decoded. */
  text: string;
  /** True if the server closed (FIN or reset) before `timeoutMs`. */
  closed: boolean;
  /** Responses parsed from `text`, in order. */
  responses: RawResponse[];
}

export interface RawResponse {
  status: number;
  /** Lowercase name → values in order. */
  headers: Map<string, string[]>;
  body: string;
}

export interface RawRequestOptions {
  /** Give up waiting for the server to close after this long. Default 3000 ms. */
  timeoutMs?: number;
  /** Write the parts with this pause between them (slow clients). Default: all at once. */
  parts?: (string | Buffer)[];
  pauseMs?: number;
  /** Half-close our side after writing. Default false (a real client keeps the connection). */
  endAfterWrite?: boolean;
  host?: string;
  /**
   * Resolve as soon as this holds for the complete responses so far (`closed` false), instead of
   * waiting out `timeoutMs` on a connection the server keeps open: a loaded machine then gets the
   * whole `timeoutMs`, and a quick one doesn't wait it.
   */
  until?: (responses: RawResponse[], text: string) => boolean;
  /** Once `until` holds, go on collecting this long (to see that nothing more arrives). */
  afterUntilMs?: number;
}

/** Sends `data` on a fresh connection and collects the answer until close or timeout. */
export function rawRequest(
  port: number,
  data: string | Buffer,
  options: RawRequestOptions = {},
): Promise<RawExchange> {
  const timeoutMs = options.timeoutMs ?? 3_000;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let settled = false;
    const socket: Socket = connect(port, options.host ?? "127.0.0.1");
    const finish = (closed: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString("latin1");
      resolve({ text, closed, responses: parseResponses(text) });
    };
    let untilHeld = false;
    let timer = setTimeout(() => finish(false), timeoutMs);
    socket.on("data", (chunk: Buffer) => {
      chunks.push(chunk);
      if (options.until === undefined) return;
      const text = Buffer.concat(chunks).toString("latin1");
      if (untilHeld || !options.until(parseResponses(text, { completeOnly: true }), text)) return;
      untilHeld = true;
      if (!options.afterUntilMs) finish(false);
      else {
        clearTimeout(timer);
        timer = setTimeout(() => finish(false), options.afterUntilMs);
      }
    });
    socket.on("end", () => finish(true));
    socket.on("close", () => finish(true));
    socket.on("error", (err: NodeJS.ErrnoException) => {
      if (err.code === "ECONNRESET" || err.code === "EPIPE") finish(true);
      else if (!settled) {
        settled = true;
        clearTimeout(timer);
        reject(err);
      }
    });
    socket.on("connect", async () => {
      const parts = options.parts ?? [data];
      for (let i = 0; i < parts.length; i++) {
        if (socket.destroyed) return;
        socket.write(parts[i]!);
        if (options.pauseMs && i < parts.length - 1) {
          await new Promise((r) => setTimeout(r, options.pauseMs));
        }
      }
      if (options.endAfterWrite) socket.end();
    });
  });
}

/**
 * Parses back-to-back HTTP/1.1 responses (Content-Length or chunked bodies). The last one may be
 * cut short (a connection that ended mid-body) unless `completeOnly`, which stops before a
 * response whose body has not all arrived (one read to the close never counts as complete).
 */
export function parseResponses(
  text: string,
  { completeOnly = false }: { completeOnly?: boolean } = {},
): RawResponse[] {
  const responses: RawResponse[] = [];
  let rest = text;
  while (rest.startsWith("HTTP/")) {
    const headEnd = rest.indexOf("\r\n\r\n");
    if (headEnd === -1) break;
    const lines = rest.slice(0, headEnd).split("\r\n");
    const status = Number(lines[0]!.split(" ")[1]);
    const headers = new Map<string, string[]>();
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(":");
      const name = line.slice(0, colon).trim().toLowerCase();
      const list = headers.get(name) ?? [];
      list.push(line.slice(colon + 1).trim());
      headers.set(name, list);
    }
    rest = rest.slice(headEnd + 4);
    let body = "";
    const length = headers.get("content-length")?.[0];
    if ((status >= 100 && status < 200) || status === 304 || status === 204) {
      // no body
    } else if (length !== undefined) {
      if (completeOnly && rest.length < Number(length)) break;
      body = rest.slice(0, Number(length));
      rest = rest.slice(Number(length));
    } else if (headers.get("transfer-encoding")?.[0]?.toLowerCase() === "chunked") {
      let complete = false;
      for (;;) {
        const lineEnd = rest.indexOf("\r\n");
        if (lineEnd === -1) break;
        const size = Number.parseInt(rest.slice(0, lineEnd), 16);
        // Not a chunk-size line: mis-framed, so parsing stops here (and never loops).
        if (Number.isNaN(size)) {
          rest = "";
          break;
        }
        if (size === 0) {
          const trailerEnd = rest.indexOf("\r\n\r\n", lineEnd);
          complete = trailerEnd !== -1;
          rest = complete ? rest.slice(trailerEnd + 4) : "";
          break;
        }
        if (rest.length < lineEnd + 2 + size + 2) {
          body += rest.slice(lineEnd + 2, lineEnd + 2 + size);
          rest = "";
          break;
        }
        body += rest.slice(lineEnd + 2, lineEnd + 2 + size);
        rest = rest.slice(lineEnd + 2 + size + 2);
      }
      if (completeOnly && !complete) break;
    } else {
      if (completeOnly) break;
      body = rest;
      rest = "";
    }
    responses.push({ status, headers, body });
  }
  return responses;
}
