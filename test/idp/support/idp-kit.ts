/**
 * The kit every identity-provider profile is built from: what a token request looked like to the
 * server (content type, form or JSON fields, Basic credentials decoded the way the provider does),
 * the replies providers send, and a profile's shape. A profile is a small real token endpoint: it
 * makes the checks the provider documents and answers with the provider's documented shapes.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { UpstreamConfigFile } from "../../../src/config/schema.js";

/** A token request as the provider's server sees it. */
export interface SeenRequest {
  method: string;
  /** Path without the query. */
  path: string;
  query: URLSearchParams;
  /** Media type of the body, lowercased, without parameters ("" when none). */
  mediaType: string;
  headers: IncomingMessage["headers"];
  /** Body fields: form fields, or a JSON object's string fields; empty when neither. */
  fields: Map<string, string>;
  /** Basic credentials, when an Authorization: Basic header came. */
  basic?: {
    /** id and secret form-decoded, as RFC 6749 §2.3.1 says (most servers). */
    decoded: { id: string; secret: string } | undefined;
    /** id and secret as they are in the header (servers that do not decode them). */
    raw: { id: string; secret: string } | undefined;
  };
  /** The client id the request names: Basic (decoded) or the client_id field. */
  clientId: string | undefined;
}

/** What a provider answers. */
export interface Reply {
  status: number;
  headers?: Record<string, string>;
  body: string;
}

export function json(status: number, body: unknown, headers: Record<string, string> = {}): Reply {
  return {
    status,
    headers: { "content-type": "application/json;charset=UTF-8", ...headers },
    body: JSON.stringify(body),
  };
}

export function text(status: number, contentType: string, body: string): Reply {
  return { status, headers: { "content-type": contentType }, body };
}

/** A provider's documented request checks and answers. */
export interface IdpProfile {
  /** As the docs table names it. */
  provider: string;
  /** The token endpoint's path (and query, for Apigee) on the profile's server. */
  tokenPath: string;
  client: { id: string; secret: string };
  /** Answer one request to tokenPath. */
  handle(request: SeenRequest): Reply;
  /** The bearer-proxy upstream settings that work with this provider (docs table). */
  settings: Partial<UpstreamConfigFile>;
  /** Cases run with the real token client, each against a fresh view of the server. */
  cases: ProfileCase[];
  /** Run one proxy end to end (config → token → upstream sees Authorization). */
  endToEnd?: boolean;
}

export interface ProfileCase {
  name: string;
  /** Overrides of `settings` (a wrong secret, a missing scope, …). */
  settings?: Partial<UpstreamConfigFile>;
  /** Success: what the token response must hold. */
  expectToken?: {
    accessToken: string;
    expiresInSeconds: number | undefined;
    scope?: string | undefined;
    notes?: string[];
  };
  /** Failure: the error's code and message, and details such as the body excerpt. */
  expectError?: {
    code: string;
    message: RegExp;
    bodyExcerpt?: string | RegExp;
    hint?: RegExp;
  };
}

/** Read a token request the way a server would. */
export async function readRequest(req: IncomingMessage): Promise<SeenRequest> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const body = Buffer.concat(chunks).toString("utf8");
  const url = new URL(req.url ?? "/", "https://idp.invalid");
  const mediaType = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
  const fields = new Map<string, string>();
  if (mediaType === "application/x-www-form-urlencoded") {
    for (const [k, v] of new URLSearchParams(body)) if (!fields.has(k)) fields.set(k, v);
  } else if (mediaType === "application/json") {
    try {
      const parsed = JSON.parse(body) as Record<string, unknown>;
      for (const [k, v] of Object.entries(parsed)) if (typeof v === "string") fields.set(k, v);
    } catch {
      // a bad JSON body has no fields
    }
  }
  const basic = readBasic(req.headers.authorization);
  return {
    method: req.method ?? "",
    path: url.pathname,
    query: url.searchParams,
    mediaType,
    headers: req.headers,
    fields,
    ...(basic ? { basic } : {}),
    clientId: basic?.decoded?.id ?? fields.get("client_id"),
  };
}

function readBasic(header: string | undefined): SeenRequest["basic"] {
  const match = /^Basic ([A-Za-z0-9+/=]+)$/i.exec(header ?? "");
  if (!match) return undefined;
  const pair = Buffer.from(match[1]!, "base64").toString("utf8");
  const colon = pair.indexOf(":");
  if (colon < 0) return { decoded: undefined, raw: undefined };
  const raw = { id: pair.slice(0, colon), secret: pair.slice(colon + 1) };
  let decoded: { id: string; secret: string } | undefined;
  try {
    const formDecode = (v: string) => decodeURIComponent(v.replace(/\+/g, " "));
    decoded = { id: formDecode(raw.id), secret: formDecode(raw.secret) };
  } catch {
    decoded = undefined;
  }
  return { decoded, raw };
}

/** The client's credentials as sent in the body (client_secret_post). */
export function postCredentials(request: SeenRequest): { id: string; secret: string } | undefined {
  const id = request.fields.get("client_id");
  const secret = request.fields.get("client_secret");
  return id !== undefined && secret !== undefined ? { id, secret } : undefined;
}

/** Whether `credentials` are the profile's client. */
export function isClient(
  profile: Pick<IdpProfile, "client">,
  credentials: { id: string; secret: string } | undefined,
): boolean {
  return credentials?.id === profile.client.id && credentials.secret === profile.client.secret;
}

/** Send a reply. */
export function send(res: ServerResponse, reply: Reply): void {
  res.writeHead(reply.status, {
    "content-length": Buffer.byteLength(reply.body),
    "cache-control": "no-store",
    ...reply.headers,
  });
  res.end(reply.body);
}

/** A JWT-shaped token (not signed: the proxy never reads it). */
export function jwtLike(subject: string): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
  return `${part({ alg: "RS256", typ: "JWT" })}.${part({ sub: subject, iat: 1_700_000_000 })}.c2lnbmF0dXJlLW5vdC1jaGVja2Vk`;
}

export type AuthOutcome =
  /** The profile's client with its secret, by an allowed method. */
  | "ok"
  /** No client authentication at all. */
  | "none"
  /** A client id the server does not know. */
  | "unknown-client"
  /** The right client id with a wrong secret. */
  | "bad-secret"
  /** Credentials by a method this client may not use (e.g. body when only Basic is allowed). */
  | "method-not-allowed";

/**
 * Client authentication as the provider does it: `methods` it allows for this client, and how it
 * reads Basic credentials (`form`: decodes them as RFC 6749 §2.3.1 says; `raw`: takes them as they
 * are, like old Spring Security OAuth2).
 */
export function authenticate(
  profile: Pick<IdpProfile, "client">,
  request: SeenRequest,
  options: { methods: readonly ("post" | "basic")[]; basicDecoding?: "form" | "raw" },
): AuthOutcome {
  const post = postCredentials(request);
  const basic = request.basic
    ? options.basicDecoding === "raw"
      ? request.basic.raw
      : request.basic.decoded
    : undefined;
  const method = basic ? "basic" : post ? "post" : undefined;
  const credentials = basic ?? post;
  if (method === undefined || credentials === undefined) return "none";
  if (credentials.id !== profile.client.id) return "unknown-client";
  if (!options.methods.includes(method)) return "method-not-allowed";
  return credentials.secret === profile.client.secret ? "ok" : "bad-secret";
}

/** A form body with grant_type=client_credentials, or what the server says when it is not. */
export function isClientCredentialsForm(request: SeenRequest): boolean {
  return (
    request.method === "POST" &&
    request.mediaType === "application/x-www-form-urlencoded" &&
    request.fields.get("grant_type") === "client_credentials"
  );
}
