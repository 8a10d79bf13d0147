/**
 * Issue #24: a rotated `dpop.keyFile` is taken without a restart (polled like private-key-jwt's
 * key), listeners learn the new thumbprint (tokens bound to the old key are useless), and a
 * broken replacement leaves the old key in force.
 */
import { rename } from "node:fs/promises";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { BearerProxyError } from "../../src/errors.js";
import { createDpop, type Dpop } from "../../src/token/dpop/index.js";
import { createDpopKeyDir, type DpopKeyDir } from "../helpers/dpop-keys.js";

let keys: DpopKeyDir;
let dpop: Dpop | undefined;
beforeEach(async () => {
  keys = await createDpopKeyDir();
});
afterEach(async () => {
  dpop?.close();
  await keys.remove();
});

const headerOf = (proof: string) =>
  JSON.parse(Buffer.from(proof.split(".")[0]!, "base64url").toString());

describe("dpop.keyFile re-read", () => {
  it("signs with the new key after the file changes, and says so once", async () => {
    const path = await keys.write("dpop.pem", "ec-p256");
    const errors: BearerProxyError[] = [];
    dpop = await createDpop(
      { keyFile: path },
      { pollIntervalMs: 0, onKeyReloadError: (e) => errors.push(e) },
    );
    const changes: string[] = [];
    dpop.onKeyChange((jkt) => changes.push(jkt));
    const before = dpop.jkt;

    await dpop.key.check();
    expect(changes).toEqual([]); // unchanged file: nothing to report

    // Written aside and renamed in, as tools (and Kubernetes' ..data swap) do.
    await keys.write("next.pem", "ed25519");
    await rename(`${keys.dir}/next.pem`, path);
    await dpop.key.check();
    expect(dpop.jkt).not.toBe(before);
    expect(changes).toEqual([dpop.jkt]);
    expect(dpop.algorithm).toBe("EdDSA");
    expect(headerOf(dpop.proofFor("GET", "https://x.example/")).jwk.kty).toBe("OKP");
    expect(errors).toEqual([]);
  });

  it("keeps the old key when the new file is unusable, and reports why", async () => {
    const path = await keys.write("dpop.pem", "ec-p256");
    const errors: BearerProxyError[] = [];
    dpop = await createDpop(
      { keyFile: path, algorithm: "ES256" },
      { pollIntervalMs: 0, onKeyReloadError: (e) => errors.push(e) },
    );
    const changes: string[] = [];
    dpop.onKeyChange((jkt) => changes.push(jkt));
    const before = dpop.jkt;

    await keys.write("dpop.pem", "rsa-1024");
    await dpop.key.check();
    expect(dpop.jkt).toBe(before);
    expect(changes).toEqual([]);
    expect(errors.map((e) => e.message)).toEqual([
      expect.stringMatching(/ES256 needs an EC P-256 key, found RSA 1024-bit/),
    ]);

    // Fixed: taken.
    await keys.write("dpop.pem", "ec-p256");
    await dpop.key.check();
    expect(dpop.jkt).not.toBe(before);
    expect(changes).toEqual([dpop.jkt]);
  });

  it("polls on its own", async () => {
    const path = await keys.write("dpop.pem", "ec-p256");
    dpop = await createDpop({ keyFile: path }, { pollIntervalMs: 20 });
    const before = dpop.jkt;
    const changed = new Promise<string>((resolve) => dpop!.onKeyChange(resolve));
    await keys.write("dpop.pem", "ec-p256");
    expect(await changed).not.toBe(before);
  });
});
