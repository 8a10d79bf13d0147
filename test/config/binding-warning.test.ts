/**
 * Issue 24, certificate-bound tokens (RFC 8705 §3): with `clientAuth: tls-client-auth` the
 * token may be bound to the `tokenTls` certificate, so `validate` (and start) warn when `tls`
 * would present another certificate, or none, upstream. Only a warning: the configuration
 * loads, because many authorization servers authenticate by certificate without binding.
 */
import { copyFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfigWithWarnings } from "../../src/config/load.js";
import { generateCertificates } from "../helpers/tls.js";
import { removeTempDirs, tempDir } from "./load-helpers.js";

const WARNING =
  "tokens bound to the tokenTls certificate (RFC 8705) will be refused upstream unless tls presents the same certificate";

let dir: string;

beforeAll(async () => {
  dir = tempDir();
  const bound = await generateCertificates();
  const other = await generateCertificates({ ca: bound });
  writeFileSync(join(dir, "ca.pem"), bound.caPem);
  writeFileSync(join(dir, "bound.crt"), bound.certPem);
  writeFileSync(join(dir, "bound.key"), bound.keyPem);
  writeFileSync(join(dir, "other.crt"), other.certPem);
  writeFileSync(join(dir, "other.key"), other.keyPem);
  // The same certificate under another name (one Secret mounted twice).
  copyFileSync(join(dir, "bound.crt"), join(dir, "copy.crt"));
  copyFileSync(join(dir, "bound.key"), join(dir, "copy.key"));
});
afterAll(removeTempDirs);

/** One upstream "api" (`clientAuth` as given) with the given YAML lines, loaded from `dir`. */
async function warningsOf(lines: string[], clientAuth = "tls-client-auth"): Promise<string[]> {
  const credentials =
    clientAuth === "tls-client-auth"
      ? ["clientId: id", "clientAuth: tls-client-auth"]
      : ["clientId: id", "clientSecret: secret", `clientAuth: ${clientAuth}`];
  const upstream = ["baseUrl: https://api.example.com", ...credentials, ...lines];
  const configText = `upstreams:\n  - name: api\n${upstream.map((l) => `    ${l}`).join("\n")}\n`;
  const { warnings } = await loadConfigWithWarnings({ configText, env: {}, cwd: dir });
  return warnings;
}

const tokenTls = "tokenTls: { caFile: ca.pem, certFile: bound.crt, keyFile: bound.key }";

describe("tokenTls and tls present different client certificates", () => {
  it("warns when tls presents another certificate", async () => {
    expect(
      await warningsOf([
        tokenTls,
        "tls: { caFile: ca.pem, certFile: other.crt, keyFile: other.key }",
      ]),
    ).toEqual([
      `upstreams[0] (api).tls.certFile: ${WARNING}; found tls.certFile ${join(dir, "other.crt")}, tokenTls.certFile ${join(dir, "bound.crt")} (line 7)`,
    ]);
  });

  it("warns when tls presents no certificate, or there is no tls", async () => {
    expect(await warningsOf([tokenTls, "tls: { caFile: ca.pem }"])).toEqual([
      `upstreams[0] (api).tls: ${WARNING}; found tls without certFile (no client certificate upstream), tokenTls.certFile ${join(dir, "bound.crt")} (line 7)`,
    ]);
    expect(await warningsOf([tokenTls])).toEqual([
      `upstreams[0] (api).tls: ${WARNING}; found no tls (no client certificate upstream), tokenTls.certFile ${join(dir, "bound.crt")} (line 2)`,
    ]);
  });
});

describe("no warning", () => {
  it.each([
    ["tls names the same file", [tokenTls, "tls: { certFile: bound.crt, keyFile: bound.key }"]],
    [
      "tls names a copy of the same certificate",
      [tokenTls, "tls: { certFile: copy.crt, keyFile: copy.key }"],
    ],
    [
      "there is no tokenTls: tls serves the token endpoint too",
      ["tls: { caFile: ca.pem, certFile: bound.crt, keyFile: bound.key }"],
    ],
  ])("when %s", async (_, lines) => {
    expect(await warningsOf(lines)).toEqual([]);
  });

  it("when the client authenticates otherwise (no certificate-bound token to expect)", async () => {
    expect(
      await warningsOf(
        [
          "tokenTls: { certFile: bound.crt, keyFile: bound.key }",
          "tls: { certFile: other.crt, keyFile: other.key }",
        ],
        "body",
      ),
    ).toEqual([]);
  });
});
