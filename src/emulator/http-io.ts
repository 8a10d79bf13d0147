import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";

/** Small request/response helpers shared by the emulator's routes. */

/** Answer with a JSON body and an exact Content-Length. Does nothing if the socket is gone. */
export function sendJson(
  res: ServerResponse,
  statusCode: number,
  body: unknown,
  headers: OutgoingHttpHeaders = {},
): void {
  if (res.headersSent || res.destroyed) return;
  const payload = Buffer.from(JSON.stringify(body), "utf8");
  res.writeHead(statusCode, {
    ...headers,
    "content-type": "application/json",
    "content-length": payload.length,
  });
  res.end(payload);
}

/**
 * Every value of a header as received, from rawHeaders. Node folds or drops duplicates in
 * `req.headers` (it keeps only the first Authorization), which would hide exactly the mistakes a
 * strict upstream must see.
 */
export function headerValues(req: IncomingMessage, name: string): string[] {
  const wanted = name.toLowerCase();
  const values: string[] = [];
  const raw = req.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === wanted) values.push(raw[i + 1]!);
  }
  return values;
}

/** The path of a request target, without the query. */
export function pathOf(url: string | undefined): string {
  const target = url ?? "";
  const query = target.indexOf("?");
  return query === -1 ? target : target.slice(0, query);
}

export type BodyResult = { kind: "ok"; body: Buffer } | { kind: "too-large" } | { kind: "aborted" };

/** Read a whole request body, giving up once it exceeds `limitBytes`. */
export function readBodyLimited(req: IncomingMessage, limitBytes: number): Promise<BodyResult> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limitBytes) {
    return Promise.resolve({ kind: "too-large" });
  }
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const finish = (result: BodyResult) => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onAbort);
      req.off("close", onClose);
      resolve(result);
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > limitBytes) finish({ kind: "too-large" });
      else chunks.push(chunk);
    };
    const onEnd = () => finish({ kind: "ok", body: Buffer.concat(chunks, received) });
    const onAbort = () => finish({ kind: "aborted" });
    const onClose = () => {
      if (!req.complete) onAbort();
    };
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onAbort);
    req.on("close", onClose);
  });
}
