/**
 * Issue 33: the footprint's two idle floors. The bare floor listens and does nothing else; the
 * floor after one TLS request makes exactly one verified HTTPS GET once listening (what a
 * sidecar's token fetch pages in of the runtime). Real children, a real TLS server.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpsServer, type Server } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestPki } from "../helpers/tls.js";
import { waitFor } from "../helpers/wait.js";

const { FLOOR_SCRIPT, TLS_FLOOR_SCRIPT } = (await import(
  new URL("../../bench/footprint.mjs", import.meta.url).href
)) as { FLOOR_SCRIPT: string; TLS_FLOOR_SCRIPT: string };

let server: Server;
let url: string;
let caFile: string;
const dir = mkdtempSync(join(tmpdir(), "bp-footprint-floor-"));
const seen: string[] = [];

beforeAll(async () => {
  const pki = await createTestPki();
  caFile = join(dir, "ca.pem");
  writeFileSync(caFile, pki.caPem);
  server = createHttpsServer({ cert: pki.good.certPem, key: pki.good.keyPem }, (req, res) => {
    seen.push(`${req.method} ${req.url}`);
    res.end("ok");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no port");
  url = `https://127.0.0.1:${address.port}/`;
});

afterAll(() => {
  server?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Runs a floor script until `done` holds, then stops it; resolves with its stderr. */
async function runFloor(script: string, done: () => boolean): Promise<string> {
  const child = spawn(process.execPath, ["-e", script], {
    env: { ...process.env, FLOOR_PORT: "0", FLOOR_TLS_URL: url, FLOOR_CA: caFile },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (chunk) => {
    stderr += chunk;
  });
  try {
    await waitFor(() => done() || child.exitCode !== null, "the floor's work");
  } finally {
    child.kill();
  }
  return stderr;
}

describe("footprint floors", () => {
  it("after one TLS request: one GET over verified TLS, and nothing on stderr", async () => {
    const before = seen.length;
    const stderr = await runFloor(TLS_FLOOR_SCRIPT, () => seen.length > before);
    expect(seen.slice(before)).toEqual(["GET /"]);
    expect(stderr).toBe("");
  });

  it("the bare floor makes no request", async () => {
    const before = seen.length;
    let lived = false;
    setTimeout(() => {
      lived = true;
    }, 500);
    await runFloor(FLOOR_SCRIPT, () => lived);
    expect(seen.length).toBe(before);
  });
});
