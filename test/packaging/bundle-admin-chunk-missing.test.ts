/**
 * Issue 33: fastify is a chunk of the bundle loaded on the first admin request the probes'
 * fast path does not answer (src/admin/admin-listener.ts). An install that lost that file (a
 * broken copy, a partial layer) must keep proxying and probing: the request that needed it gets
 * a logged 500 in the error contract, and the process lives on.
 */
import { cpSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request } from "undici";
import { afterAll, describe, expect, it } from "vitest";
import { waitFor } from "../helpers/wait.js";
import { startHostileWorld } from "../hostile/support/hostile-world.js";
import { REPO_ROOT } from "./schema-tools.js";

describe("the bundle without its admin-server chunk", () => {
  const dir = mkdtempSync(join(tmpdir(), "bp-bundle-no-admin-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("answers probes and proxies; GET /status is a logged 500, and the process lives on", async () => {
    cpSync(join(REPO_ROOT, "dist/bundle"), dir, { recursive: true });
    const chunks = readdirSync(dir).filter((f) => f.startsWith("admin-server."));
    expect(chunks).toHaveLength(1);
    rmSync(join(dir, chunks[0]!));

    const world = await startHostileWorld({ cli: join(dir, "cli.cjs") });
    try {
      const get = async (path: string) => {
        const answer = await request(`${world.proxy.adminUrl}${path}`);
        return { statusCode: answer.statusCode, text: await answer.body.text() };
      };
      // A forwarded request first: the token is fetched, so the proxy is ready.
      const first = await request(`${world.proxy.proxyUrl}/echo/before`);
      await first.body.dump();
      expect(first.statusCode).toBe(200);
      expect((await get("/readyz")).statusCode).toBe(200);
      expect((await get("/metrics")).statusCode).toBe(200);
      const status = await get("/status");
      expect(status.statusCode).toBe(500);
      expect(JSON.parse(status.text)).toEqual({
        error: { code: "internal_error", message: "admin endpoint failed" },
      });
      const proxied = await request(`${world.proxy.proxyUrl}/echo/after`);
      await proxied.body.dump();
      expect(proxied.statusCode).toBe(200);
      expect(await world.livez()).toBe(true);
      // The line reaches the test through the child's stdout, maybe after the 500 did.
      await waitFor(
        () => world.logs().some((line) => line.msg === "admin server could not be built"),
        "the admin server's build failure in the log",
      );
      expect(world.logs()).toContainEqual(
        expect.objectContaining({ level: "error", msg: "admin server could not be built" }),
      );
      expect(await world.proxy.stop()).toBe(0);
    } finally {
      await world.close();
    }
  });
});
