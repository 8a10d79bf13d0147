import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer, type Server } from "node:https";
import type { Socket } from "node:net";
import { Agent, request } from "undici";
import type { TokenFaultHandler } from "../../../src/emulator/emulator-types.js";
import type { ServerCertificate } from "../../helpers/tls.js";

/**
 * A recording pass-through in front of the emulator's token endpoint. The proxy is pointed at
 * the tap (`tokenUrl`), the tap forwards each token request unchanged to the emulator and relays
 * the answer. It sees every token ever issued (so a test can search for all of them), when each
 * request came and which client asked, and it can rewrite a real token response (odd
 * `expires_in`, a delay) while the token inside stays one the emulator's API accepts. It can
 * also break the endpoint for some clients only, passing the others through.
 */

/** One token request as the tap saw it. */
export interface TapExchange {
  /** Date.now() when the request arrived. */
  receivedAtMs: number;
  /** Date.now() when the answer was sent (undefined while pending or if it failed). */
  answeredAtMs: number | undefined;
  clientId: string | undefined;
  status: number | undefined;
  /** The access_token of a 200 answer. */
  accessToken: string | undefined;
  /** expires_in as relayed (after any rewrite). */
  expiresIn: unknown;
}

export interface TokenTap {
  origin: string;
  /** Token URL of the default API version, through the tap. */
  tokenUrl: string;
  exchanges: TapExchange[];
  /** Every access_token relayed so far. */
  issuedTokens(): string[];
  /** Rewrite a 200 JSON answer before relaying it; undefined relays as is. */
  rewrite: ((body: Record<string, unknown>) => Record<string, unknown>) | undefined;
  /** Wait this long before relaying each answer. */
  delayMs: number;
  /** A fault to answer a client's token request with instead of forwarding it (body already read). */
  faultFor: ((clientId: string | undefined) => TokenFaultHandler | undefined) | undefined;
  close(): Promise<void>;
}

export interface TokenTapOptions {
  /** The emulator's base URL. */
  target: string;
  /** CA the emulator's certificate chains to. */
  caPem: string;
  /** The tap's own server certificate (same CA, so the proxy trusts it too). */
  cert: ServerCertificate;
}

const FORWARDED_REQUEST_HEADERS = ["content-type", "accept", "x-version", "authorization"];
const RELAYED_RESPONSE_HEADERS = [
  "content-type",
  "retry-after",
  "location",
  "www-authenticate",
  "cache-control",
];

export async function startTokenTap(options: TokenTapOptions): Promise<TokenTap> {
  const agent = new Agent({ connect: { ca: options.caPem } });
  const sockets = new Set<Socket>();
  const tap: TokenTap = {
    origin: "",
    tokenUrl: "",
    exchanges: [],
    issuedTokens: () =>
      tap.exchanges.flatMap((e) => (e.accessToken === undefined ? [] : [e.accessToken])),
    rewrite: undefined,
    delayMs: 0,
    faultFor: undefined,
    close: async () => {},
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const exchange: TapExchange = {
      receivedAtMs: Date.now(),
      answeredAtMs: undefined,
      clientId: undefined,
      status: undefined,
      accessToken: undefined,
      expiresIn: undefined,
    };
    tap.exchanges.push(exchange);
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString("utf8");
    exchange.clientId = clientIdOf(body, req.headers["content-type"]);
    const fault = tap.faultFor?.(exchange.clientId);
    if (fault) {
      fault(req, res);
      return;
    }
    const abort = new AbortController();
    res.on("close", () => abort.abort());
    const headers: Record<string, string> = {};
    for (const name of FORWARDED_REQUEST_HEADERS) {
      const value = req.headers[name];
      if (typeof value === "string") headers[name] = value;
    }
    const answer = await request(`${options.target}${req.url ?? "/"}`, {
      method: req.method as "POST",
      headers,
      body,
      dispatcher: agent,
      signal: abort.signal,
    });
    let text = await answer.body.text();
    const outHeaders: Record<string, string> = {};
    for (const name of RELAYED_RESPONSE_HEADERS) {
      const value = answer.headers[name];
      if (typeof value === "string") outHeaders[name] = value;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    if (answer.statusCode === 200 && isRecord(parsed)) {
      if (tap.rewrite) {
        parsed = tap.rewrite(parsed);
        text = JSON.stringify(parsed);
      }
      if (isRecord(parsed)) {
        if (typeof parsed.access_token === "string") exchange.accessToken = parsed.access_token;
        exchange.expiresIn = parsed.expires_in;
      }
    }
    if (tap.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, tap.delayMs));
    if (res.destroyed) return;
    res.writeHead(answer.statusCode, { ...outHeaders, "content-length": Buffer.byteLength(text) });
    res.end(text);
    exchange.status = answer.statusCode;
    exchange.answeredAtMs = Date.now();
  };

  const server: Server = createServer(
    { cert: options.cert.certPem, key: options.cert.keyPem },
    (req, res) => {
      // The emulator hung up or failed: hang up on the proxy too, as the emulator would have.
      handle(req, res).catch(() => res.destroy());
    },
  );
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  server.on("tlsClientError", () => {});
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  tap.origin = `https://127.0.0.1:${port}`;
  tap.tokenUrl = `${tap.origin}/iam/v1/oauth2/token`;
  tap.close = async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await agent.destroy();
  };
  return tap;
}

function clientIdOf(body: string, contentType: string | undefined): string | undefined {
  try {
    if (contentType?.startsWith("application/json")) {
      const parsed = JSON.parse(body) as { client_id?: unknown };
      return typeof parsed.client_id === "string" ? parsed.client_id : undefined;
    }
    return new URLSearchParams(body).get("client_id") ?? undefined;
  } catch {
    return undefined;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
