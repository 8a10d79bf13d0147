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
import { afterAll, describe, expect, it } from "vitest";
import { startHostileWorld } from "../hostile/support/hostile-world.js";

const BUNDLED_UNDICI = "internal/deps/undici/undici";

describe("node:http on the run path", () => {
  const dir = mkdtempSync(join(tmpdir(), "bp-node-http-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("never loads Node's bundled undici (start-up, token, one forwarded request)", async () => {
    const listFile = join(dir, "modules.json");
    const preload = join(dir, "dump-modules.mjs");
    writeFileSync(
      preload,
      `import { writeFileSync } from "node:fs";
process.on("exit", () => writeFileSync(${JSON.stringify(listFile)}, JSON.stringify(process.moduleLoadList)));
`,
    );
    // The hostile tests' world: the real CLI, the emulator as token endpoint, a fake upstream.
    const world = await startHostileWorld({
      env: { NODE_OPTIONS: `--import=${pathToFileURL(preload).href}` },
    });
    try {
      const answer = await request(`${world.proxy.proxyUrl}/echo/hello`);
      await answer.body.dump();
      expect(answer.statusCode).toBe(200);
      const ready = await request(`${world.proxy.adminUrl}/readyz`);
      await ready.body.dump();
      expect(ready.statusCode).toBe(200);
      expect(await world.proxy.stop()).toBe(0);
    } finally {
      await world.close();
    }
    const loaded = JSON.parse(readFileSync(listFile, "utf8")) as string[];
    // The list is real: node:http's own internals are in it.
    expect(loaded).toContain("NativeModule _http_server");
    expect(loaded.filter((name) => name.includes(BUNDLED_UNDICI))).toEqual([]);
  });
});
