/**
 * The parts of undici the proxy runs on — `Agent`, `ProxyAgent`, `request`, `buildConnector`
 * and the `Dispatcher` base class — loaded from
 * undici's own modules instead of its index. The index also loads fetch, WebSocket, EventSource,
 * the cache and mock layers and five interceptors (110 modules): 2.9 MiB more V8 heap, ~8 MiB
 * more RSS on Node 20 and ~7 MiB more of the node binary paged in on Node 24 (the built-ins those
 * layers require), and twice the load time (bench/PROFILE.md, "Footprint"). These are the same
 * classes the index exports (test/net/undici-core.test.ts checks it against the installed
 * undici), so a release that moves them fails that test rather than a request.
 */
import { createRequire } from "node:module";
import type * as Undici from "undici";

const require = createRequire(import.meta.url);

export const Agent: typeof Undici.Agent = require("undici/lib/dispatcher/agent.js");
export const ProxyAgent: typeof Undici.ProxyAgent = require("undici/lib/dispatcher/proxy-agent.js");
/** The TLS/TCP connector factory (the early-answer and certificate-reloading connectors wrap it). */
export const buildConnector: typeof Undici.buildConnector = require("undici/lib/core/connect.js");

const DispatcherBase: typeof Undici.Dispatcher = require("undici/lib/dispatcher/dispatcher.js");
// What undici's index does on load: the request/stream/pipeline/upgrade/connect methods live on
// Dispatcher.prototype. Idempotent, and the same functions, when the index is loaded too.
Object.assign(DispatcherBase.prototype, require("undici/lib/api/index.js"));
/** The base class of every dispatcher (the upgrade path extends it). */
export const Dispatcher = DispatcherBase;

type RequestOptions = Omit<Undici.Dispatcher.RequestOptions, "origin" | "path" | "method"> & {
  method?: Undici.Dispatcher.HttpMethod;
  dispatcher: Undici.Dispatcher;
};

/**
 * undici's top-level `request(url, options)` for the case this project uses: an explicit
 * dispatcher (never the global one). Splits the URL into origin and path as undici does.
 */
export function request(
  url: string | URL,
  options: RequestOptions,
): Promise<Undici.Dispatcher.ResponseData> {
  const target = typeof url === "string" ? new URL(url) : url;
  const { dispatcher, ...rest } = options;
  return dispatcher.request({
    ...rest,
    origin: target.origin,
    path: `${target.pathname}${target.search}`,
    method: rest.method ?? (rest.body ? "PUT" : "GET"),
  });
}
