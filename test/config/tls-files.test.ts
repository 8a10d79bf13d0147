/**
 * TLS files are checked for what they hold at load time: Node would accept a CA file without a
 * certificate and verify against the system roots alone, failing only at the first request.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfigWithWarnings } from "../../src/config/load.js";
import { createTestPki, type TestPki } from "../helpers/tls.js";
import { issuesOfText, removeTempDirs, tempDir } from "./load-helpers.js";

let pki: TestPki;
let dir: string;

beforeAll(async () => {
  pki = await createTestPki();
  dir = tempDir();
});
afterAll(removeTempDirs);

function file(name: string, content: string | Buffer): string {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
}

function withTls(tls: Record<string, string>): string {
  const lines = Object.entries(tls).map(([k, v]) => `      ${k}: ${v}`);
  return [
    "upstreams:",
    "  - name: api",
    "    baseUrl: https://api.example.com",
    "    clientId: id",
    "    clientSecret: secret",
    "    tls:",
    ...lines,
    "",
  ].join("\n");
}

const messages = async (text: string) =>
  (await issuesOfText(text)).map((i) => `${i.path}: ${i.message}`);

describe("tls.caFile", () => {
  it("loads a PEM bundle of several certificates", async () => {
    const bundle = file("bundle.pem", `${pki.caPem}\n${pki.otherCa.caPem}`);
    const { config } = await loadConfigWithWarnings({
      configText: withTls({ caFile: bundle }),
      env: {},
    });
    expect(config.upstreams[0]?.tls.caFile).toBe(bundle);
  });

  it("refuses a file with no certificate, saying what it holds instead", async () => {
    const text = file("notes.txt", "not a certificate\n");
    const key = file("key-as-ca.pem", pki.good.keyPem);
    const empty = file("empty.pem", "");
    const der = file("ca.der", Buffer.from([0x30, 0x82, 0x01, 0x0a, 0x02, 0x82]));
    for (const [path, hint] of [
      [text, " (not PEM text; convert DER with `openssl x509 -inform der -in FILE -out FILE.pem`)"],
      [key, " (it holds a private key)"],
      [empty, " (it is empty)"],
      [der, " (not PEM text; convert DER with `openssl x509 -inform der -in FILE -out FILE.pem`)"],
    ] as const) {
      expect(await messages(withTls({ caFile: path }))).toEqual([
        `upstreams[0] (api).tls.caFile: expected PEM certificates ("-----BEGIN CERTIFICATE-----"), found none in ${path}${hint} (line 7)`,
      ]);
    }
  });

  it("refuses a certificate block that does not parse, naming which one", async () => {
    const broken = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    const path = file("broken.pem", `${pki.caPem}\n${broken}`);
    const [message] = await messages(withTls({ caFile: path }));
    expect(message).toMatch(
      new RegExp(
        `^upstreams\\[0\\] \\(api\\)\\.tls\\.caFile: expected PEM certificates, but certificate 2 of 2 in ${path} does not parse \\(.+\\) \\(line 7\\)$`,
      ),
    );
  });
});

describe("tls.certFile and tls.keyFile", () => {
  it("load a matching client certificate and key", async () => {
    const cert = file("client.pem", pki.good.certPem);
    const key = file("client-key.pem", pki.good.keyPem);
    const { config } = await loadConfigWithWarnings({
      configText: withTls({ certFile: cert, keyFile: key }),
      env: {},
    });
    expect(config.upstreams[0]?.tls.keyFile).toBe(key);
  });

  it("refuse a key that belongs to another certificate", async () => {
    const cert = file("client2.pem", pki.good.certPem);
    const otherKey = file("other-key.pem", pki.wrongHost.keyPem);
    expect(await messages(withTls({ certFile: cert, keyFile: otherKey }))).toEqual([
      `upstreams[0] (api).tls.keyFile: expected the private key of the certificate in tls.certFile (${cert}), found another key in ${otherKey} (line 8)`,
    ]);
  });

  it("refuse a key file without a key, and never quote the file", async () => {
    const cert = file("client3.pem", pki.good.certPem);
    const notKey = file("not-key.pem", pki.good.certPem);
    const garbled = file(
      "garbled-key.pem",
      "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LW1hdGVyaWFs\n-----END PRIVATE KEY-----\n",
    );
    expect(await messages(withTls({ certFile: cert, keyFile: notKey }))).toEqual([
      `upstreams[0] (api).tls.keyFile: expected a PEM private key ("-----BEGIN PRIVATE KEY-----"), found none in ${notKey} (line 8)`,
    ]);
    const [message] = await messages(withTls({ certFile: cert, keyFile: garbled }));
    expect(message).toContain(`the key in ${garbled} does not parse`);
    expect(message).not.toContain("c2VjcmV0LW1hdGVyaWFs");
  });
});
