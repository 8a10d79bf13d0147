/**
 * Baseline (d): bare fastify + @fastify/http-proxy (reply-from on undici) with a static
 * Authorization header injected in rewriteRequestHeaders. reply-from turns certificate checks
 * off by default for undici: they are switched back on here (`rejectUnauthorized: true`).
 *
 *   node bench/baselines/fastify-http-proxy.mjs --upstream https://127.0.0.1:N --ca FILE --token T
 * prints `FASTIFY_READY {"port":N}`.
 */
import { readFileSync } from "node:fs";
import proxy from "@fastify/http-proxy";
import Fastify from "fastify";
import { announceReady, exitOnSignal, readBaselineArgs } from "../lib/baseline-cli.mjs";

const values = readBaselineArgs("fastify-http-proxy.mjs");

const authorization = `Bearer ${values.token}`;
const app = Fastify({ logger: false, keepAliveTimeout: 60_000, bodyLimit: 2 * 1024 * 1024 });
await app.register(proxy, {
  upstream: values.upstream,
  undici: {
    connections: 128,
    pipelining: 1,
    keepAliveTimeout: 60_000,
    tls: {
      ca: readFileSync(values.ca),
      servername: values.servername,
      rejectUnauthorized: true,
    },
  },
  replyOptions: {
    rewriteRequestHeaders: (_request, headers) => ({ ...headers, authorization }),
  },
});
await app.listen({ port: Number(values.port), host: "127.0.0.1" });
announceReady("FASTIFY_READY", app.server.address().port);
exitOnSignal(() => app.close());
