#!/usr/bin/env node
// Start-up cost of a gateway with many credentials: builds a config with N upstreams (one
// credential each, routed by Host), loads it, builds the app, listens, and reports the time and
// memory it took. tokenCache.eagerLimit is 0 here (the first 100 would be prefetched otherwise),
// so nothing is fetched.
// Usage: node scripts/many-credentials.mjs [--count 10000]   (after `npm run build`)
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";

const { values } = parseArgs({ options: { count: { type: "string", default: "10000" } } });
const count = Number(values.count);
const dist = new URL("../dist/", import.meta.url);
const { loadConfig } = await import(new URL("config/load.js", dist).href);
const { buildApp } = await import(new URL("app.js", dist).href);
const { createLogger } = await import(new URL("observability/logger.js", dist).href);

const dir = mkdtempSync(join(tmpdir(), "bp-many-"));
const upstreams = [];
for (let i = 0; i < count; i++) {
  upstreams.push({
    name: `svc-${i}`,
    baseUrl: `https://api-${i % 50}.example.test`,
    clientId: `client-${i}`,
    clientSecret: `secret-${i}-${"x".repeat(24)}`,
    match: { hosts: [`svc-${i}.internal`] },
  });
}
const configText = JSON.stringify({
  listen: { host: "127.0.0.1", port: 0 },
  admin: { host: "127.0.0.1", port: 0 },
  log: { level: "warn" },
  tokenCache: { eagerLimit: 0 },
  upstreams,
});
writeFileSync(join(dir, "config.json"), configText);

const mib = (b) => (b / 1024 / 1024).toFixed(1);
globalThis.gc?.();
const before = process.memoryUsage();
const t0 = performance.now();
const config = await loadConfig({ configText, env: {}, cwd: dir });
const t1 = performance.now();
const app = buildApp(config, { logger: createLogger({ level: "warn", format: "json" }) });
await app.listen();
const t2 = performance.now();
globalThis.gc?.();
const after = process.memoryUsage();
const lines = [
  `credentials: ${count} (${app.tokens.credentialCount} distinct; eager limit ${config.tokenCache.eagerLimit})`,
  `load + validate config: ${(t1 - t0).toFixed(0)} ms`,
  `build app + listen: ${(t2 - t1).toFixed(0)} ms`,
  `total start: ${(t2 - t0).toFixed(0)} ms`,
  `heap used: ${mib(before.heapUsed)} -> ${mib(after.heapUsed)} MiB (+${mib(after.heapUsed - before.heapUsed)} MiB, ${((after.heapUsed - before.heapUsed) / count / 1024).toFixed(2)} KiB per credential)`,
  `rss: ${mib(before.rss)} -> ${mib(after.rss)} MiB`,
];
console.log(lines.join("\n"));
await app.close(1000);
rmSync(dir, { recursive: true, force: true });
