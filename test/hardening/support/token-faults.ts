import type { IncomingMessage, ServerResponse } from "node:http";
import type { TokenFaultHandler } from "../../../src/emulator/emulator-types.js";

/**
 * Broken token endpoints, as fault handlers for the emulator (or the tap), and the tables of
 * cases the token-endpoint-trouble tests run through.
 */

/** A marker inside every forbidden token value, searched for in logs and upstream traffic. */
export const MARK = "FORBIDDENTOKENMARK";

export function json(
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): TokenFaultHandler {
  return (_req: IncomingMessage, res: ServerResponse) => {
    const text = JSON.stringify(body);
    res.writeHead(status, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(text),
      ...headers,
    });
    res.end(text);
  };
}

export function html(status: number): TokenFaultHandler {
  return (_req, res) => {
    res.writeHead(status, { "content-type": "text/html; charset=utf-8" });
    res.end(
      "<!doctype html><html><body><h1>Service Temporarily Unavailable</h1><p>nginx</p></body></html>",
    );
  };
}

/** A token response that is fine except for `patch`. */
export function tokenWith(patch: Record<string, unknown>): TokenFaultHandler {
  return json(200, {
    access_token: "abc.def.ghi",
    token_type: "Bearer",
    expires_in: 599,
    ...patch,
  });
}

export const hang: TokenFaultHandler = () => {
  // Never answer; the emulator destroys the socket when it closes.
};
export const reset: TokenFaultHandler = (req) => req.socket.destroy();

export interface ColdCase {
  name: string;
  fault: TokenFaultHandler;
  status?: number;
  code?: string;
  /** What the token component's log must say about the failure (clients get a fixed text). */
  message?: RegExp;
}

export const COLD_CASES: ColdCase[] = [
  {
    name: "a hang (bounded by token.timeout)",
    fault: hang,
    message: /did not answer within 300 ms/,
  },
  { name: "a connection reset", fault: reset, message: /failed/ },
  {
    name: "an HTML 500 error page",
    fault: html(500),
    message: /answered 500 \(content type text\/html/,
  },
  {
    name: "an HTML 200 page (captive portal)",
    fault: html(200),
    message: /content type text\/html.*expected application\/json/,
  },
  {
    name: "a non-JSON body labelled JSON",
    fault: (_req, res) =>
      res.writeHead(200, { "content-type": "application/json" }).end("{not json"),
    message: /invalid token response/,
  },
  { name: "a JSON array", fault: json(200, []), message: /not a JSON object/ },
  {
    name: "access_token a number",
    fault: tokenWith({ access_token: 12345 }),
    message: /access_token/,
  },
  { name: "access_token null", fault: tokenWith({ access_token: null }), message: /access_token/ },
  { name: "access_token empty", fault: tokenWith({ access_token: "" }), message: /access_token/ },
  {
    name: "token_type an array",
    fault: tokenWith({ token_type: ["Bearer"] }),
    message: /token_type/,
  },
  { name: "token_type mac", fault: tokenWith({ token_type: "mac" }), message: /token_type/ },
  {
    name: "token_type DPoP (never sent as Bearer)",
    fault: tokenWith({ token_type: "DPoP" }),
    message: /token_type is "DPoP", which bearer-proxy cannot use/,
  },
  {
    name: "expires_in zero",
    fault: tokenWith({ expires_in: 0 }),
    message: /expires_in is the number 0/,
  },
  {
    name: "expires_in negative",
    fault: tokenWith({ expires_in: -60 }),
    message: /expires_in is the number -60/,
  },
  {
    name: "expires_in a string that is not a number",
    fault: tokenWith({ expires_in: "soon" }),
    message: /expires_in is a string that is not a number/,
  },
  {
    name: "expires_in a fraction below one second",
    fault: tokenWith({ expires_in: 0.5 }),
    message: /expires_in is the number 0.500/,
  },
  {
    name: "CR/LF in access_token",
    fault: tokenWith({ access_token: `abc\r\nX-Injected: ${MARK}` }),
    message: /RFC 6750/,
  },
  {
    name: "a bare LF in access_token",
    fault: tokenWith({ access_token: `abc${MARK}\n` }),
    message: /RFC 6750/,
  },
  {
    name: "a space in access_token",
    fault: tokenWith({ access_token: `abc ${MARK}` }),
    message: /RFC 6750/,
  },
  {
    name: "a tab in access_token",
    fault: tokenWith({ access_token: `abc\t${MARK}` }),
    message: /RFC 6750/,
  },
  {
    name: "non-ASCII in access_token",
    fault: tokenWith({ access_token: `abc\u00e9${MARK}` }),
    message: /RFC 6750/,
  },
  {
    name: "a NUL in access_token",
    fault: tokenWith({ access_token: `abc\u0000${MARK}` }),
    message: /RFC 6750/,
  },
  {
    name: "a 400 invalid_request",
    fault: json(400, { error: "invalid_request" }),
    message: /invalid_request/,
  },
  {
    name: "invalid_client",
    fault: json(
      401,
      { error: "invalid_client", error_description: "client authentication failed" },
      { "www-authenticate": 'Basic realm="x"' },
    ),
    status: 502,
    code: "token_rejected",
    message: /invalid_client.*check clientId\/clientSecret/,
  },
];

/** Reads the token request's client_id, then answers with that client's handler. */
export function dispatchByClient(
  handlerFor: (clientId: string) => TokenFaultHandler | undefined,
): TokenFaultHandler {
  return (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const clientId =
        new URLSearchParams(Buffer.concat(chunks).toString("utf8")).get("client_id") ?? "";
      const handler = handlerFor(clientId);
      if (handler) handler(req, res);
      else res.writeHead(500).end();
    });
  };
}

export interface WarmCase {
  name: string;
  /** What the token endpoint does for this client once its first token was fetched. */
  fault?: TokenFaultHandler;
  /** Instead of a fault: the IdP stops accepting this client's secret (real invalid_client). */
  revokeSecret?: boolean;
  /** Code clients get once the cached token has expired. */
  code: "token_unavailable" | "token_rejected";
}

export const WARM_CASES: WarmCase[] = [
  { name: "a hang", fault: hang, code: "token_unavailable" },
  { name: "resets", fault: reset, code: "token_unavailable" },
  { name: "an HTML 500", fault: html(500), code: "token_unavailable" },
  { name: "wrong JSON types", fault: tokenWith({ expires_in: true }), code: "token_unavailable" },
  {
    name: "CR/LF in the new access_token",
    fault: tokenWith({ access_token: `abc\r\nX-Injected: ${MARK}` }),
    code: "token_unavailable",
  },
  {
    name: "429 with a long Retry-After",
    fault: json(429, { error: "slow_down" }, { "retry-after": "30" }),
    code: "token_unavailable",
  },
  {
    name: "a 307 redirect",
    fault: (_req, res) => res.writeHead(307, { location: "https://127.0.0.1:1/x" }).end(),
    code: "token_unavailable",
  },
  {
    name: "invalid_client (the secret was revoked at the IdP)",
    revokeSecret: true,
    code: "token_rejected",
  },
];
