/**
 * Issue #24: an upstream without `dpop` loads nothing of the DPoP room's machinery (key, proofs,
 * nonces): the token source reaches it through a dynamic import on the first fetch that needs a
 * key (dpop/lazy-dpop.ts). Checked in a fresh Node process, as the tracing test does, that runs
 * a token source (src/ transpiled as is) through one fetch with a module hook recording every
 * module resolved; the same harness with `dpop: {}` must see the room, so the check can't pass
 * by seeing nothing.
 */
import { readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT, useFreshProcess } from "../helpers/fresh-process-modules.js";
import { makeTokenSpec } from "../helpers/upstream-config.js";
import { IMMEDIATE_POLICY } from "./support.js";

// One token source, one fetch (the token endpoint stubbed), then what it handed out.
const MAIN = `
import { createTokenSource } from "./src/token/token-source.js";
const logger = { child() { return logger; }, info() {}, warn() {}, error() {}, debug() {} };
const source = createTokenSource({
  upstream: "api",
  spec: JSON.parse(process.env.SPEC),
  policy: JSON.parse(process.env.POLICY),
  logger,
  secretPollIntervalMs: 0,
  fetchToken: async (_credentials, _signal, dpop) => ({
    accessToken: "opaque-token-value",
    expiresInSeconds: 300,
    scope: undefined,
    expiresInClamped: false,
    ...(dpop ? { tokenType: "DPoP" } : {}),
  }),
});
const token = await source.getToken();
source.close();
console.log(JSON.stringify({ tokenType: token.tokenType, bound: token.dpop !== undefined }));
`;

function listTs(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? listTs(path) : path.endsWith(".ts") ? [path] : [];
  });
}

describe("without dpop, nothing of src/token/dpop is loaded", () => {
  // The token side only: it never imports the proxy floor or the composition root.
  const fresh = useFreshProcess({
    prefix: "bp-dpop-load-",
    sources: () =>
      listTs(join(ROOT, "src"))
        .filter((file) => !/\/src\/(proxy|app)\//.test(file))
        .map((file) => [
          file,
          join("src", relative(join(ROOT, "src"), file)).replace(/\.ts$/, ".js"),
        ]),
    main: MAIN,
  });

  async function loadedWith(dpop: { keyFile: undefined; algorithm: undefined } | undefined) {
    const spec = makeTokenSpec({}, { dpop });
    const { result, resolved } = await fresh.run<{ tokenType: string; bound: boolean }>({
      SPEC: JSON.stringify(spec),
      POLICY: JSON.stringify(IMMEDIATE_POLICY),
    });
    const room = resolved
      .filter((url) => url.includes("/src/token/dpop/"))
      .map((url) => url.slice(url.indexOf("/src/token/dpop/") + "/src/token/dpop/".length));
    return { ...result, resolved, room: [...new Set(room)].sort() };
  }

  it("off: only the lazy loader of the room is resolved", async () => {
    const off = await loadedWith(undefined);
    expect(off).toMatchObject({ tokenType: "Bearer", bound: false });
    expect(off.resolved.some((url) => url.endsWith("/src/token/token-source.js"))).toBe(true);
    expect(off.room).toEqual(["lazy-dpop.js"]);
  });

  it("on (control): the same harness sees the room", async () => {
    const on = await loadedWith({ keyFile: undefined, algorithm: undefined });
    expect(on).toMatchObject({ tokenType: "DPoP", bound: true });
    expect(on.room).toEqual(
      expect.arrayContaining([
        "dpop-key.js",
        "index.js",
        "lazy-dpop.js",
        "nonce-store.js",
        "proof.js",
      ]),
    );
  });
});
