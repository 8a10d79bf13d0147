/**
 * Issue #24 at start: `dpop.keyFile` must be readable and a key that can sign proofs (the file
 * check clientKeyFile gets, plus the loader's own key rules), `dpop.algorithm` must fit it, and
 * `tokenHeaders` may not set `DPoP` (the proxy signs a fresh proof per token request).
 */

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfigWithWarnings } from "../../src/config/load.js";
import { issuesOfText } from "../config/load-helpers.js";
import { createDpopKeyDir, type DpopKeyDir } from "../helpers/dpop-keys.js";

let keys: DpopKeyDir;
beforeAll(async () => {
  keys = await createDpopKeyDir();
});
afterAll(() => keys.remove());

function upstream(extra: string): string {
  return `upstreams:\n  - name: api\n    baseUrl: https://api.example.com\n    clientId: id\n    clientSecret: secret\n${extra}`;
}

const messages = async (text: string) =>
  (await issuesOfText(text)).map((i) => `${i.path}: ${i.message}`);

describe("dpop settings at start", () => {
  it("takes a usable key file, and {} for an ephemeral key", async () => {
    const keyFile = await keys.write("good.pem", "ed25519");
    const loaded = await loadConfigWithWarnings({
      configText: upstream(`    dpop:\n      keyFile: ${keyFile}\n`),
      env: {},
    });
    expect(loaded.config.upstreams[0]!.token.dpop).toEqual({ keyFile, algorithm: undefined });
    const ephemeral = await loadConfigWithWarnings({
      configText: upstream("    dpop: {}\n"),
      env: {},
    });
    expect(ephemeral.config.upstreams[0]!.token.dpop).toEqual({
      keyFile: undefined,
      algorithm: undefined,
    });
  });

  it("refuses a missing file, a file without a key, and keys that cannot sign proofs", async () => {
    const missing = `${keys.dir}/absent.pem`;
    expect(await messages(upstream(`    dpop:\n      keyFile: ${missing}\n`))).toEqual([
      expect.stringMatching(
        /^upstreams\[0\] \(api\)\.dpop\.keyFile: expected a readable file, found nothing at .*absent\.pem/,
      ),
    ]);
    const text = await keys.writeText("text.pem", "not a key\n");
    expect(await messages(upstream(`    dpop:\n      keyFile: ${text}\n`))).toEqual([
      expect.stringMatching(/dpop\.keyFile: expected a PEM private key .*text\.pem/),
    ]);
    const p384 = await keys.write("p384.pem", "ec-p384");
    expect(await messages(upstream(`    dpop:\n      keyFile: ${p384}\n`))).toEqual([
      expect.stringMatching(
        /dpop\.keyFile: expected a key that signs DPoP proofs \(supported: .*\), found: .*ES256 needs P-256.* in .*p384\.pem/,
      ),
    ]);
    const ed448 = await keys.write("ed448.pem", "ed448");
    expect(await messages(upstream(`    dpop:\n      keyFile: ${ed448}\n`))).toEqual([
      expect.stringMatching(/dpop\.keyFile: .*EdDSA needs an Ed25519 key for DPoP, found Ed448/),
    ]);
  });

  it("refuses an algorithm the key cannot sign with, at dpop.algorithm", async () => {
    const ec = await keys.write("ec.pem", "ec-p256");
    expect(
      await messages(upstream(`    dpop:\n      keyFile: ${ec}\n      algorithm: PS256\n`)),
    ).toEqual([
      expect.stringMatching(
        /^upstreams\[0\] \(api\)\.dpop\.algorithm: .*PS256 needs an RSA key, found EC P-256/,
      ),
    ]);
  });

  it("refuses DPoP in tokenHeaders", async () => {
    expect(await messages(upstream("    tokenHeaders:\n      DPoP: x\n"))).toEqual([
      expect.stringMatching(
        /tokenHeaders\.DPoP: cannot be set here: the proxy signs a fresh DPoP proof for each token request/,
      ),
    ]);
  });
});
