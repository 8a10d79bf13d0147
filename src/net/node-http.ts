/**
 * node:http for the proxy's ES modules, loaded the CommonJS way. On Node 24 an ES
 * `import … from "node:http"` builds the built-in's ES facade, which reads every export — the
 * lazy `WebSocket`, `CloseEvent` and `MessageEvent` getters included, and they load Node's own
 * bundled copy of undici: 65 more internal modules, ~13 MiB more RSS and ~40 ms more start-up
 * (bench/PROFILE.md, "Footprint"). `require` reads only what is used. Node 20 has no such getters;
 * the same code serves both. test/net/node-http.test.ts checks the run path on the running Node.
 */
import type * as NodeHttp from "node:http";
import { createRequire } from "node:module";

const http = createRequire(import.meta.url)("node:http") as typeof NodeHttp;

export const createServer: typeof NodeHttp.createServer = http.createServer;
export const ServerResponse: typeof NodeHttp.ServerResponse = http.ServerResponse;
export type ServerResponse = NodeHttp.ServerResponse;
export type { IncomingMessage, Server, ServerOptions } from "node:http";
