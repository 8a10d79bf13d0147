/**
 * The upstream's response header list as sent to the client: raw order, duplicates (several
 * Set-Cookie) and case kept, hop-by-hop fields dropped (RFC 9110 §7.6.1), and `Connection: close`
 * added when the client connection must end after this response.
 */

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "te",
  "transfer-encoding",
  "upgrade",
  "proxy-authorization",
  "proxy-authenticate",
  "http2-settings",
]);

function text(item: Buffer | string): string {
  return typeof item === "string" ? item : item.toString("latin1");
}

/** Flat [name, value, …] list for `res.writeHead`, from undici's raw response headers. */
export function clientResponseHeaders(
  raw: readonly (Buffer | string)[],
  closeConnection: boolean,
): string[] {
  let named: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = text(raw[i]!);
    if (name.length === 10 && name.toLowerCase() === "connection") {
      named ??= new Set();
      for (const part of text(raw[i + 1]!).split(",")) named.add(part.trim().toLowerCase());
    }
  }
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = text(raw[i]!);
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || named?.has(lower)) continue;
    out.push(name, text(raw[i + 1]!));
  }
  if (closeConnection) out.push("connection", "close");
  return out;
}
