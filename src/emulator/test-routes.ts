import { createHash } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { DOWNLOAD_CHUNK } from "./download-pattern.js";
import { pathOf, sendJson } from "./http-io.js";

/**
 * Routes that exist for tests of a proxy in front of the emulator. All sit behind the same strict
 * bearer check as the API routes (see api-routes.ts); these handlers run after it passed.
 */

/** What `/echo/*` answers: the request exactly as the emulator received it. */
export interface EchoResponse {
  method: string;
  /** The raw request target, byte for byte. */
  url: string;
  /** `req.rawHeaders` as [name, value] pairs, in order, case preserved. */
  headers: [string, string][];
  bodyLength: number;
  bodySha256: string;
}

/** Largest `/download/<n>` served (1 TiB): any real test stays far below. */
const MAX_DOWNLOAD_BYTES = 2 ** 40;

/** `ANY /echo/...`: hash the body as it streams in, then describe the request. */
export function handleEcho(req: IncomingMessage, res: ServerResponse): void {
  const hash = createHash("sha256");
  let bodyLength = 0;
  req.on("data", (chunk: Buffer) => {
    bodyLength += chunk.length;
    hash.update(chunk);
  });
  req.on("error", () => {});
  req.on("end", () => {
    const raw = req.rawHeaders;
    const headers: [string, string][] = [];
    for (let i = 0; i + 1 < raw.length; i += 2) headers.push([raw[i]!, raw[i + 1]!]);
    const echo: EchoResponse = {
      method: req.method ?? "",
      url: req.url ?? "",
      headers,
      bodyLength,
      bodySha256: hash.digest("hex"),
    };
    sendJson(res, 200, echo);
  });
}

/** `GET /download/<n>`: stream n pattern bytes (see download-pattern.ts), honouring backpressure. */
export function handleDownload(req: IncomingMessage, res: ServerResponse): void {
  const raw = pathOf(req.url).slice("/download/".length);
  const total = /^\d{1,13}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(total <= MAX_DOWNLOAD_BYTES)) {
    sendJson(res, 400, {
      error: "invalid_request",
      error_description: "use /download/<bytes>, bytes a decimal integer up to 2^40",
    });
    return;
  }
  res.writeHead(200, { "content-type": "application/octet-stream", "content-length": total });
  let remaining = total;
  const pump = () => {
    while (remaining > 0 && !res.destroyed) {
      const size = Math.min(remaining, DOWNLOAD_CHUNK.length);
      remaining -= size;
      if (!res.write(DOWNLOAD_CHUNK.subarray(0, size))) {
        res.once("drain", pump);
        return;
      }
    }
    if (remaining === 0) res.end();
  };
  pump();
}

/** `GET /redirect`: a redirect a proxy must pass through, never follow with a token. */
export function handleRedirect(_req: IncomingMessage, res: ServerResponse): void {
  res.writeHead(307, { location: "https://example.invalid/", "content-length": 0 });
  res.end();
}

/** `GET /set-cookies`: two Set-Cookie fields, which must not be folded into one. */
export function handleSetCookies(_req: IncomingMessage, res: ServerResponse): void {
  const body = Buffer.from('{"cookies":2}');
  res.writeHead(200, {
    "content-type": "application/json",
    "content-length": body.length,
    "set-cookie": ["a=1; Path=/; Secure; HttpOnly", "b=2; Path=/; Max-Age=60"],
  });
  res.end(body);
}
