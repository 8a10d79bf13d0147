import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import type { Emulator } from "../../../src/emulator/emulator-types.js";

/**
 * What the end-to-end pacing tests (test/gateway/pacing-*.test.ts) share: an upstream entry
 * whose token comes from the emulator, a client that behaves like a legacy tool (one fresh
 * connection per request, no retry, a chosen source address), and readers for /metrics and
 * /status.
 */

/** An `upstreams[]` entry routed at `/<name>/`, its token from the emulator's endpoint. */
export function upstreamEntry(
  name: string,
  baseUrl: string,
  emulator: Emulator,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    name,
    baseUrl,
    tokenUrl: `${emulator.url}/iam/v1/oauth2/token`,
    clientId: "demo-client",
    clientSecret: "demo-secret",
    match: { pathPrefix: `/${name}/` },
    stripPrefix: true,
    ...extra,
  };
}

export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  /** From the request's start to the answer's end. */
  ms: number;
  /** `bearer-proxy-error`, when the proxy answered itself. */
  code: string | undefined;
}

export interface SendOptions {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** Source address of the connection (127.0.0.x): the peer a `by: caller` budget sees. */
  localAddress?: string;
  /** Hang up when it aborts (the promise then rejects). */
  signal?: AbortSignal;
}

/** One request on a fresh connection, never retried: a legacy tool's way. */
export function send(url: string, options: SendOptions = {}): Promise<Answer> {
  const target = new URL(url);
  const startMs = performance.now();
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        path: `${target.pathname}${target.search}`,
        method: options.method ?? "GET",
        headers: {
          ...options.headers,
          ...(options.body === undefined
            ? {}
            : { "content-length": String(Buffer.byteLength(options.body)) }),
        },
        localAddress: options.localAddress ?? "127.0.0.1",
        agent: false,
        signal: options.signal,
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          text += chunk;
        });
        res.on("end", () => {
          const code = res.headers["bearer-proxy-error"];
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            text,
            ms: performance.now() - startMs,
            code: typeof code === "string" ? code : undefined,
          });
        });
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

/** `count` requests at once. */
export function burst(url: string, count: number, options: SendOptions = {}): Promise<Answer[]> {
  return Promise.all(Array.from({ length: count }, () => send(url, options)));
}

/** The admin listener's /metrics text. */
export async function metricsText(adminUrl: string): Promise<string> {
  const answer = await send(`${adminUrl}/metrics`);
  if (answer.status !== 200) throw new Error(`/metrics answered ${answer.status}`);
  return answer.text;
}

/**
 * The value of the sample `name{labels}` (labels given must all match; others may be present),
 * summed over matching samples; 0 when none.
 */
export function metricValue(
  text: string,
  name: string,
  labels: Record<string, string> = {},
): number {
  let sum = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const matches = Object.entries(labels).every(([key, value]) =>
      line.includes(`${key}="${value}"`),
    );
    if (matches) sum += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return sum;
}

/** One upstream's entry of the /status JSON. */
export async function upstreamStatus(
  adminUrl: string,
  name: string,
): Promise<Record<string, unknown> & { rateLimit?: Record<string, unknown> }> {
  const answer = await send(`${adminUrl}/status?q=${encodeURIComponent(name)}`, {
    headers: { accept: "application/json" },
  });
  const report = JSON.parse(answer.text) as { upstreams: { name: string }[] };
  const found = report.upstreams.find((u) => u.name === name);
  if (!found) throw new Error(`/status has no upstream ${name}: ${answer.text}`);
  return found as Record<string, unknown> & { rateLimit?: Record<string, unknown> };
}
