/**
 * Shared pieces of the caller-authorization tests (issue 23): htpasswd users at bcrypt cost 4,
 * Basic values, a plain node:http client that can pick its source address (undici's Agent
 * cannot) or speak absolute-form like a forward-proxy client, the proxy's access lines, the
 * admin pages, and the one check every file ends with: no credential anywhere it could leak.
 */
import { Agent, request as httpRequest, type IncomingHttpHeaders } from "node:http";
import bcrypt from "bcryptjs";
import { exportJWK, generateKeyPair, type JWK, SignJWT } from "jose";
import { expect } from "vitest";
import type { EchoResponse } from "../../src/emulator/test-routes.js";
import { type AppUnderTest, logsMatching } from "./app-under-test.js";
import { waitFor } from "./wait.js";

/** What the proxy logs once it has re-read `callers.basic.usersFile`. */
export const USERS_FILE_RELOADED = "callers.basic users file reloaded";

/**
 * Rewrite the gateway's htpasswd file `name` with `users` and wait, at most `waitMs`, for the
 * proxy to log that it reloaded it; resolves to the ms that took.
 */
export async function rewriteUsersFile(
  gateway: Pick<AppUnderTest, "records" | "writeFile">,
  name: string,
  users: Record<string, string>,
  waitMs: number,
): Promise<number> {
  const reloadsBefore = logsMatching(gateway.records, USERS_FILE_RELOADED).length;
  const startedMs = performance.now();
  gateway.writeFile(name, htpasswdFile(users));
  await waitFor(
    () => logsMatching(gateway.records, USERS_FILE_RELOADED).length > reloadsBefore,
    "the users file reload",
    waitMs,
  );
  return performance.now() - startedMs;
}

/** `user:hash` at cost 4 (the lowest the proxy accepts: fast tests, same code path). */
export function htpasswdLine(user: string, password: string): string {
  return `${user}:${bcrypt.hashSync(password, 4)}`;
}

/** An htpasswd file for `users` (user → password), one line each. */
export function htpasswdFile(users: Record<string, string>): string {
  return `${Object.entries(users)
    .map(([user, password]) => htpasswdLine(user, password))
    .join("\n")}\n`;
}

/** The base64 part of a Basic credential (RFC 7617): what must never be logged. */
export function basicValue(user: string, password: string): string {
  return Buffer.from(`${user}:${password}`).toString("base64");
}

/** A whole `Proxy-Authorization: Basic …` value. */
export function basicHeader(user: string, password: string): string {
  return `Basic ${basicValue(user, password)}`;
}

export interface HttpAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  /** Raw header list as received (name, value, name, value, …). */
  raw: string[];
  text: string;
}

export interface HttpGetOptions {
  headers?: Record<string, string>;
  /** Source address of the TCP connection. Default 127.0.0.1. */
  localAddress?: string;
  /** Send this absolute-form target (`http://billing.internal/echo`) instead of `url`'s path. */
  absoluteTarget?: string;
}

/** One GET on a fresh connection (no agent: every request is its own TCP peer). */
export function httpGet(url: string, options: HttpGetOptions = {}): Promise<HttpAnswer> {
  const target = new URL(url);
  const headers = { ...options.headers };
  if (options.absoluteTarget) headers.host ??= new URL(options.absoluteTarget).host;
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        path: options.absoluteTarget ?? `${target.pathname}${target.search}`,
        headers,
        localAddress: options.localAddress ?? "127.0.0.1",
        agent: false,
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          text += chunk;
        });
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, raw: res.rawHeaders, text }),
        );
      },
    );
    req.on("error", reject);
    req.end();
  });
}

/** The values of every `name` field line in a raw header list (case-insensitive name). */
export function rawValues(raw: readonly string[], name: string): string[] {
  const values: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === name) values.push(raw[i + 1]!);
  }
  return values;
}

/** The error code of a proxy answer (`{"error":{"code":…}}`). */
export function errorCode(text: string): string | undefined {
  try {
    return (JSON.parse(text) as { error?: { code?: string } }).error?.code;
  } catch {
    return undefined;
  }
}

/** Header names (lowercased) the emulator's /echo route saw. */
export function echoedHeaderNames(echoJson: string): string[] {
  return (JSON.parse(echoJson) as EchoResponse).headers.map(([name]) => name.toLowerCase());
}

/** The value of one header the emulator's /echo route saw. */
export function echoedHeader(echoJson: string, name: string): string | undefined {
  return (JSON.parse(echoJson) as EchoResponse).headers.find(
    ([n]) => n.toLowerCase() === name,
  )?.[1];
}

/** The proxy's per-request access records. */
export function accessLines(records: readonly Record<string, unknown>[]) {
  return records.filter((r) => r.msg === "request") as (Record<string, unknown> & {
    upstream: string;
    path: string;
    status: number;
    caller?: string;
    errorCode?: string;
  })[];
}

/** GET an admin page's text (`/metrics`, `/status?format=json`). */
export async function adminText(adminUrl: string, path: string): Promise<string> {
  const answer = await httpGet(`${adminUrl}${path}`);
  expect(answer.status, `${path}: ${answer.text}`).toBe(200);
  return answer.text;
}

/** `bearer_proxy_caller_denied_total` samples as `upstream/reason` → count. */
export function callerDenialCounts(metricsText: string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const line of metricsText.split("\n")) {
    const match = /^bearer_proxy_caller_denied_total\{([^}]*)\} (\d+(?:\.\d+)?)$/.exec(line);
    if (!match) continue;
    const labels = Object.fromEntries(
      [...match[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!]),
    );
    counts[`${labels.upstream}/${labels.reason}`] = Number(match[2]);
  }
  return counts;
}

/**
 * No credential (password, Basic base64, JWT, or any piece of a JWT's signature) appears in
 * any of `texts`; each failure names where it was found.
 */
export function expectNoSecrets(
  texts: Record<string, string | readonly string[]>,
  secrets: readonly string[],
): void {
  const needles = secrets.flatMap((secret) => {
    const parts = secret.split(".");
    // A JWT: its signature alone is as bad as the whole token.
    return parts.length === 3 && parts[2]!.length > 16 ? [secret, parts[2]!] : [secret];
  });
  for (const [where, text] of Object.entries(texts)) {
    const haystack = typeof text === "string" ? text : text.join("\n");
    for (const needle of needles) {
      expect(haystack.includes(needle), `${where} contains a credential`).toBe(false);
    }
  }
}

/**
 * An upstream of the config document served by the TLS emulator with its demo client, routed by
 * `/<name>` (prefix stripped); `fields` add to it or override (`allow`, `match`, …).
 */
export function emulatorUpstream(
  emulatorUrl: string,
  name: string,
  fields: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    name,
    baseUrl: emulatorUrl,
    clientId: "demo-client",
    clientSecret: "demo-secret",
    match: { pathPrefix: `/${name}` },
    stripPrefix: true,
    ...fields,
  };
}

/** The admin pages a credential could leak into, for `expectNoSecrets`. */
export async function adminPages(adminUrl: string): Promise<{ status: string; metrics: string }> {
  return {
    status: await adminText(adminUrl, "/status?format=json"),
    metrics: await adminText(adminUrl, "/metrics"),
  };
}

/** The issuer of the clusters' service-account tokens in these tests. */
export const KUBERNETES_ISSUER = "https://kubernetes.default.svc.cluster.local";

/** The private half of a cluster signing key. */
export type ServiceAccountPrivateKey = Awaited<ReturnType<typeof generateKeyPair>>["privateKey"];

/** A cluster signing key: the private half signs, `jwk` (kid, alg, use) is published. */
export interface ServiceAccountSigningKey {
  privateKey: ServiceAccountPrivateKey;
  jwk: JWK;
}

/** An ES256 {@link ServiceAccountSigningKey}. */
export async function es256SigningKey(kid = "k1"): Promise<ServiceAccountSigningKey> {
  const keys = await generateKeyPair("ES256");
  const jwk = { ...(await exportJWK(keys.publicKey)), kid, alg: "ES256", use: "sig" };
  return { privateKey: keys.privateKey, jwk };
}

export interface ServiceAccountJwtOptions {
  subject: string;
  kid?: string;
  audience?: string;
  expiresAt?: string | number;
  claims?: Record<string, unknown>;
}

/** A service-account JWT (ES256, issued now) for `subject`; `claims` go into the payload. */
export function serviceAccountJwt(
  privateKey: ServiceAccountPrivateKey,
  options: ServiceAccountJwtOptions,
): Promise<string> {
  return new SignJWT(options.claims ?? {})
    .setProtectedHeader({ alg: "ES256", kid: options.kid ?? "k1" })
    .setIssuer(KUBERNETES_ISSUER)
    .setAudience(options.audience ?? "bearer-proxy")
    .setSubject(options.subject)
    .setIssuedAt()
    .setExpirationTime(options.expiresAt ?? "10m")
    .sign(privateKey);
}

/** A client on one keep-alive connection from `localAddress` (a pooled client, a mesh sidecar). */
export interface KeepAliveClient {
  /** GET on the pooled connection; `reused` tells whether it was the same connection as before. */
  get(url: string, headers?: Record<string, string>): Promise<HttpAnswer & { reused: boolean }>;
  close(): void;
}

export function keepAliveClient(localAddress: string): KeepAliveClient {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  return {
    get(url, headers = {}) {
      return new Promise((resolve, reject) => {
        const req = httpRequest(url, { agent, localAddress, headers }, (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => {
            text += chunk;
          });
          res.on("end", () =>
            resolve({
              status: res.statusCode ?? 0,
              headers: res.headers,
              raw: res.rawHeaders,
              text,
              reused: req.reusedSocket,
            }),
          );
        });
        req.on("error", reject);
        req.end();
      });
    },
    close: () => agent.destroy(),
  };
}
