/**
 * `bearer-proxy code-cache`: write V8's code cache for this Node beside the bundle
 * (base/v8-code-cache.ts). It starts what a sidecar starts — the demo's proxy in front of the
 * built-in emulator, on ports the kernel picks — waits until it is ready, sends one request per
 * API version and a metrics scrape, shuts it down, and saves the bytecode of everything that ran.
 * The image runs it at build time; an install from npm may run it once after installing.
 */

import { codeCacheState, writeCodeCache } from "../base/v8-code-cache.js";
import { loadConfig } from "../config/load.js";
import { startEmulator } from "../emulator/emulator.js";
import { startProxy } from "../main.js";
import { Agent, request } from "../net/undici-core.js";
import { createLogger } from "../observability/logger.js";
import { demoConfigYaml } from "./demo.js";
import { runWait } from "./wait.js";

const READY_TIMEOUT_MS = 30_000;

/** Resolves with the exit code: 0 written, 1 the proxy did not start, 2 not the bundle. */
export async function codeCacheCommand(): Promise<number> {
  if (codeCacheState() === undefined) {
    process.stderr.write(
      "bearer-proxy code-cache: only the bundle has a code cache; run dist/bundle/cli.cjs (the image's and the package's `bearer-proxy`), not dist/cli.js\n",
    );
    return 2;
  }
  const emulator = await startEmulator({ port: 0 });
  try {
    const config = await loadConfig({
      configText: demoConfigYaml({
        emulatorUrl: emulator.url,
        caFile: emulator.caFile,
        port: 0,
        adminPort: 0,
        logFormat: "json",
        logLevel: "warn",
      }),
      env: {},
    });
    const logger = createLogger({ level: config.log.level, format: config.log.format });
    const running = await startProxy(config, { logger });
    try {
      const adminUrl = `http://127.0.0.1:${running.addresses.admin.port}`;
      if ((await runWait({ adminUrl, timeoutMs: READY_TIMEOUT_MS })) !== 0) return 1;
      const proxyUrl = `http://127.0.0.1:${running.addresses.proxy[0]?.port}`;
      const dispatcher = new Agent({ keepAliveTimeout: 1 });
      for (const url of [
        `${proxyUrl}/platform/v1/spreadsheets/demo`,
        `${proxyUrl}/scripts`,
        `${adminUrl}/metrics`,
      ]) {
        const answer = await request(url, { dispatcher });
        await answer.body.dump();
        if (answer.statusCode !== 200) throw new Error(`GET ${url} answered ${answer.statusCode}`);
      }
      await dispatcher.close();
    } finally {
      await running.shutdown("code cache written");
    }
  } finally {
    await emulator.close();
  }
  const written = writeCodeCache();
  process.stdout.write(
    `bearer-proxy code-cache: ${written.files} chunks, ${Math.round(written.bytes / 1024)} KiB, in ${written.dir}\n`,
  );
  return 0;
}
