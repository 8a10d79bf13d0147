/**
 * Configuration mistakes of client authentication fail at start with the field's path and what
 * was expected (issue 16): no secret next to a secretless method, each method's own settings
 * present, and no method's settings under another.
 */
import { generateKeyPairSync } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfigWithWarnings } from "../../../src/config/load.js";
import { issuesOfText, removeTempDirs, tempDir, yaml } from "../../config/load-helpers.js";

let dir: string;
let rsaKey: string;
let ecKey: string;
let weakKey: string;

const write = (name: string, content: string) => {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
};
const pem = (k: ReturnType<typeof generateKeyPairSync>["privateKey"]) =>
  k.export({ type: "pkcs8", format: "pem" }).toString();

beforeAll(() => {
  dir = tempDir();
  rsaKey = write("rsa.key", pem(generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey));
  ecKey = write("ec.key", pem(generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey));
  weakKey = write("weak.key", pem(generateKeyPairSync("rsa", { modulusLength: 1024 }).privateKey));
  write("sa-token", "x.y.z");
});
afterAll(removeTempDirs);

function upstream(lines: string): string {
  return (
    yaml`
    upstreams:
      - name: api
        baseUrl: https://api.example.com
        clientId: app
  ` +
    lines
      .split("\n")
      .map((l) => (l.trim() ? `    ${l.trim()}` : ""))
      .join("\n")
  );
}

async function messages(text: string): Promise<string[]> {
  return (await issuesOfText(text)).map((i) => `${i.path}: ${i.message}`);
}

describe("client authentication settings", () => {
  it("refuses a secret next to each secretless method, naming the field", async () => {
    expect(
      await messages(
        upstream(`clientAuth: private-key-jwt\nclientKeyFile: ${rsaKey}\nclientSecret: s3cret`),
      ),
    ).toEqual([
      expect.stringMatching(
        /^upstreams\[0\] \(api\)\.clientSecret: expected no client secret with clientAuth: private-key-jwt \(it authenticates with a JWT signed with clientKeyFile and never sends one\), found clientSecret/,
      ),
    ]);
    expect(
      await messages(
        upstream(
          `clientAuth: client-assertion-file\nclientAssertionFile: ${join(dir, "sa-token")}\nclientSecretFile: ${rsaKey}`,
        ),
      ),
    ).toEqual([
      expect.stringMatching(
        /\.clientSecretFile: expected no client secret with clientAuth: client-assertion-file/,
      ),
    ]);
    expect(
      await messages(
        upstream(
          `clientAuth: tls-client-auth\nclientSecret: s3cret\ntokenTls: { certFile: x, keyFile: y }`,
        ),
      ),
    ).toContainEqual(
      expect.stringMatching(
        /\.clientSecret: expected no client secret with clientAuth: tls-client-auth/,
      ),
    );
  });

  it("requires each method's own material", async () => {
    expect(await messages(upstream("clientAuth: private-key-jwt"))).toEqual([
      expect.stringMatching(/\.clientKeyFile: required with clientAuth: private-key-jwt/),
    ]);
    expect(await messages(upstream("clientAuth: client-assertion-file"))).toEqual([
      expect.stringMatching(
        /\.clientAssertionFile: required with clientAuth: client-assertion-file/,
      ),
    ]);
    expect(await messages(upstream("clientAuth: tls-client-auth"))).toEqual([
      expect.stringMatching(
        /\.tokenTls: required with clientAuth: tls-client-auth: a client certificate .*found neither/,
      ),
    ]);
  });

  it("refuses one method's settings under another (a forgotten clientAuth must not send a secret)", async () => {
    const found = await messages(
      upstream(
        `clientSecret: s3cret\nclientKeyFile: ${rsaKey}\nclientAssertionFile: ${join(dir, "sa-token")}`,
      ),
    );
    expect(found).toEqual([
      expect.stringMatching(
        /\.clientKeyFile: only used with clientAuth: private-key-jwt, found clientAuth: body \(the default\)/,
      ),
      expect.stringMatching(
        /\.clientAssertionFile: only used with clientAuth: client-assertion-file, found clientAuth: body/,
      ),
    ]);
  });

  it("checks that the key can sign with the algorithm", async () => {
    expect(
      await messages(
        upstream(
          `clientAuth: private-key-jwt\nclientKeyFile: ${rsaKey}\nassertion: { algorithm: ES256 }`,
        ),
      ),
    ).toEqual([
      expect.stringMatching(
        /\.assertion\.algorithm: expected a key that fits: ES256 needs an EC P-256 key, found RSA 2048-bit/,
      ),
    ]);
    expect(
      await messages(upstream(`clientAuth: private-key-jwt\nclientKeyFile: ${weakKey}`)),
    ).toEqual([
      expect.stringMatching(
        /\.clientKeyFile: expected an RSA \(≥ 2048 bits\), EC P-256 or Ed25519 private key, found: RS256 needs an RSA key of 2048 bits or more, found 1024/,
      ),
    ]);
    expect(
      await messages(
        upstream(`clientAuth: private-key-jwt\nclientKeyFile: ${join(dir, "sa-token")}`),
      ),
    ).toEqual([expect.stringMatching(/\.clientKeyFile: expected a PEM private key/)]);
  });

  it("loads a valid secretless configuration, with the method's settings in the token spec only", async () => {
    const { config, warnings } = await loadConfigWithWarnings({
      env: {},
      configText: upstream(
        `clientAuth: private-key-jwt\nclientKeyFile: ${ecKey}\nclientKeyId: k1\nassertion: { lifetime: 2m }`,
      ),
    });
    expect(warnings).toEqual([]);
    const token = config.upstreams[0]!.token;
    expect(token.clientSecret).toBeUndefined();
    expect(token.privateKeyJwt).toEqual({
      keyFile: ecKey,
      keyId: "k1",
      certificateFile: undefined,
      audience: undefined,
      lifetimeMs: 120_000,
      algorithm: undefined,
    });
  });

  it("sidecar mode: BEARER_PROXY_CLIENT_AUTH and BEARER_PROXY_CLIENT_ASSERTION_FILE need no secret", async () => {
    const { config } = await loadConfigWithWarnings({
      env: {
        BEARER_PROXY_BASE_URL: "https://api.example.com",
        BEARER_PROXY_CLIENT_ID: "app",
        BEARER_PROXY_CLIENT_AUTH: "client-assertion-file",
        BEARER_PROXY_CLIENT_ASSERTION_FILE: join(dir, "sa-token"),
      },
    });
    expect(config.upstreams[0]!.token).toMatchObject({
      clientAuth: "client-assertion-file",
      clientAssertionFile: join(dir, "sa-token"),
      clientSecret: undefined,
    });
  });
});
