/**
 * The `run` path must not load Node's own bundled undici (src/net/node-http.ts explains how an ES
 * import of node:http does on Node 24, at ~13 MiB RSS). The real CLI runs with a preload that
 * writes Node's list of loaded internal modules at exit; the proxy gets a token and forwards a
 * request first, so the list covers start-up and the request path. Meaningful on Node 24, where
 * `.ci/run` runs the suite a second time; on Node 20 it guards against any other route there.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEmulator } from "../../src/emulator/emulator.js";
import type { Emulator } from "../../src/emulator/types.js";
import { type FakeUpstream, startFakeUpstream } from "../helpers/fake-upstreams.js";
import { startProxyProcess } from "../helpers/proxy-process.js";
import { createTestPki } from "../helpers/tls.js";

const BUNDLED_UNDICI = "internal/deps/undici/undici";

describe("node:http on the run path", () => {
  let dir: string;
  let emulator: Emulator;
  let upstream: FakeUpstream;

  beforeAll(async () => {
    const pki = await createTestPki();
    dir = mkdtempSync(join(tmpdir(), "bp-node-http-"));
    writeFileSync(join(dir, "ca.pem"), pki.caPem);
    emulator = await startEmulator({
      host: "127.0.0.1",
      port: 0,
      tls: { certPem: pki.good.certPem, keyPem: pki.good.keyPem, caPem: pki.caPem },
    });
    upstream = await startFakeUpstream({ cert: pki.good });
  });
  afterAll(async () => {
    await upstream?.close();
    await emulator?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("never loads Node's bundled undici (start-up, token, one forwarded request)", async () => {
    const listFile = join(dir, "modules.json");
    const preload = join(dir, "dump-modules.mjs");
    writeFileSync(
      preload,
      `import { writeFileSync } from "node:fs";
process.on("exit", () => writeFileSync(${JSON.stringify(listFile)}, JSON.stringify(process.moduleLoadList)));
`,
    );
    const config = {
      listen: { host: "127.0.0.1", port: 0 },
      admin: { host: "127.0.0.1", port: 0 },
      shutdown: { drainDelay: "0s", timeout: "1s" },
      upstreams: [
        {
          name: "api",
          baseUrl: upstream.origin,
          tokenUrl: `${emulator.url}/iam/v1/oauth2/token`,
          clientId: "demo-client",
          clientSecret: "demo-secret",
          tls: { caFile: join(dir, "ca.pem") },
        },
      ],
    };
    const proxy = await startProxyProcess(JSON.stringify(config), {
      NODE_OPTIONS: `--import=${pathToFileURL(preload).href}`,
    });
    try {
      const answer = await request(`${proxy.proxyUrl}/echo/hello`);
      await answer.body.dump();
      expect(answer.statusCode).toBe(200);
      const ready = await request(`${proxy.adminUrl}/readyz`);
      await ready.body.dump();
      expect(ready.statusCode).toBe(200);
    } finally {
      expect(await proxy.stop()).toBe(0);
    }
    const loaded = JSON.parse(readFileSync(listFile, "utf8")) as string[];
    // The list is real: node:http's own internals are in it.
    expect(loaded).toContain("NativeModule _http_server");
    expect(loaded.filter((name) => name.includes(BUNDLED_UNDICI))).toEqual([]);
  });
});
