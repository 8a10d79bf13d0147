/**
 * `bearer-proxy check` explains how the client authenticated (issue 16): which key and
 * algorithm, kid, x5t#S256, the assertion's aud and exp — never the key or the assertion — and
 * names the file when the client-auth step itself fails.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { runCheck } from "../../../src/commands/check.js";
import { signJws } from "../../../src/token/client-auth/jws.js";
import { capture } from "../../commands/helpers.js";
import { makeProxyConfig, makeUpstreamConfig } from "../../helpers/upstream-config.js";
import { certificateFor, makeKeyPair, useVerifyingWorld } from "./support.js";
import { thumbprintOf } from "./verifying-endpoint.js";

const world = useVerifyingWorld();

async function check(file: Record<string, unknown>) {
  const upstream = makeUpstreamConfig("idp", {
    baseUrl: world.endpoint.url,
    tokenUrl: world.endpoint.tokenUrl,
    tls: { caFile: world.caFile },
    clientSecret: undefined,
    ...file,
  });
  const stdout = capture();
  const stderr = capture();
  const code = await runCheck({
    config: makeProxyConfig([upstream]),
    stdout: stdout.stream,
    stderr: stderr.stream,
  });
  return { code, stdout: stdout.text() };
}

describe("bearer-proxy check, secretless client authentication", () => {
  it("private-key-jwt: algorithm, key type and file, kid, x5t#S256, aud and exp", async () => {
    const pair = makeKeyPair("rsa");
    const certPem = await certificateFor(pair, "rsa");
    world.endpoint.clients.set("check-app", {
      publicKeyPem: pair.publicPem,
      keyId: "key-2026",
      x5tS256: thumbprintOf(certPem),
    });
    const keyFile = world.ws.write("check.key", pair.privatePem);
    const { code, stdout } = await check({
      clientId: "check-app",
      clientAuth: "private-key-jwt",
      clientKeyFile: keyFile,
      clientKeyId: "key-2026",
      clientCertificateFile: world.ws.write("check.crt", certPem),
    });
    expect(stdout).toMatch(
      new RegExp(
        `✓ auth +private-key-jwt: RS256 with the RSA 2048-bit key in ${keyFile}; kid "key-2026"; x5t#S256 ${thumbprintOf(certPem)} \\(certificate CN=bearer-proxy test client, valid to .*\\); assertion aud "${world.endpoint.tokenUrl}", exp \\d{4}-.*Z \\(60 s\\)`,
      ),
    );
    expect(stdout).toMatch(/✓ token +200 from /);
    expect(code).toBe(0);
    expect(stdout).not.toContain(world.endpoint.seen.at(-1)!.fields.client_assertion!.slice(0, 40));
    expect(stdout).not.toContain(pair.privatePem.split("\n")[1]!);
  });

  it("client-assertion-file: an expired assertion fails the auth step with the file and the time", async () => {
    const issuer = makeKeyPair("ec");
    const now = Math.floor(Date.now() / 1000);
    const file = world.ws.write(
      "expired-token",
      signJws(
        { alg: "ES256" },
        { iss: "k8s", sub: "sa", aud: "idp", exp: now - 30, jti: randomUUID() },
        issuer.key,
        "ES256",
      ),
    );
    const { code, stdout } = await check({
      clientId: "check-app",
      clientAuth: "client-assertion-file",
      clientAssertionFile: file,
    });
    expect(code).toBe(1);
    expect(stdout).toMatch(
      new RegExp(
        `✗ auth +clientAssertionFile ${file} holds an assertion that expired at .*Z \\(\\d+ s ago\\)`,
      ),
    );
    expect(stdout).toMatch(/hint: whoever issues the assertion rotates the file/);
    expect(stdout).toMatch(/- token +skipped: client authentication failed/);
  });
});
