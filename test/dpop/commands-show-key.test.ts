/**
 * Issue #24: `bearer-proxy token` and `bearer-proxy check` with `dpop` show the key's algorithm
 * and RFC 7638 thumbprint (and, for check, that the token's `cnf.jkt` is that thumbprint) and
 * never the private key or a proof; check's API probe sends `Authorization: DPoP` with a proof.
 *
 * The real authorization server (node-oidc-provider) listens on plain http; check's TLS step
 * needs https, so it is reached through a small HTTPS front that forwards each request with
 * `X-Forwarded-Proto: https` (oidc-provider, told to trust it, then checks the proof's `htu`
 * against the https URL the client used).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCheck } from "../../src/commands/check.js";
import { runToken } from "../../src/commands/token.js";
import type { ProxyConfig } from "../../src/config/proxy-config.js";
import { capture } from "../commands/helpers.js";
import {
  type DpopAuthorizationServer,
  startDpopAuthorizationServer,
} from "../helpers/dpop-authorization-server.js";
import { createDpopKeyDir, type DpopKeyDir } from "../helpers/dpop-keys.js";
import {
  type DpopResourceServer,
  startDpopResourceServer,
} from "../helpers/dpop-resource-server.js";
import { generateCertificates } from "../helpers/tls.js";
import { makeProxyConfig, makeUpstreamConfig } from "../helpers/upstream-config.js";
import { PROOF_PREFIX, privateKeyForms } from "./support.js";

let as: DpopAuthorizationServer;
let rs: DpopResourceServer;
let front: Server;
let frontUrl: string;
let keys: DpopKeyDir;
let dir: string;
let caFile: string;

beforeAll(async () => {
  as = await startDpopAuthorizationServer();
  (as.provider as { proxy: boolean }).proxy = true;
  const certificate = await generateCertificates();
  rs = await startDpopResourceServer({
    authorizationServer: { jwksUrl: as.jwksUrl, issuer: as.issuer, audience: as.resource },
    requireNonce: true,
    certificate,
  });
  const target = new URL(as.issuer);
  front = createServer({ cert: certificate.certPem, key: certificate.keyPem }, (req, res) => {
    const forwarded = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, "x-forwarded-proto": "https" },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    req.pipe(forwarded);
  });
  await new Promise<void>((resolve) => front.listen(0, "127.0.0.1", resolve));
  frontUrl = `https://127.0.0.1:${(front.address() as AddressInfo).port}`;
  keys = await createDpopKeyDir();
  dir = mkdtempSync(join(tmpdir(), "bp-dpop-cmd-"));
  caFile = join(dir, "ca.pem");
  writeFileSync(caFile, certificate.caPem);
});
afterAll(async () => {
  front.closeAllConnections();
  await new Promise((resolve) => front.close(resolve));
  await rs.close();
  await as.close();
  await keys.remove();
  rmSync(dir, { recursive: true, force: true });
});

function configWith(dpop: { keyFile?: string }): ProxyConfig {
  return makeProxyConfig([
    makeUpstreamConfig("api", {
      baseUrl: rs.origin,
      tokenUrl: `${frontUrl}/token`,
      clientId: as.clientId,
      clientSecret: as.clientSecret,
      scope: as.scope,
      tls: { caFile },
      dpop,
    }),
  ]);
}

describe("bearer-proxy token with dpop", () => {
  it("prints the token alone on stdout and the key's algorithm and jkt on stderr", async () => {
    const keyFile = await keys.write("token-cmd.pem", "ec-p256");
    const stdout = capture();
    const stderr = capture();
    const code = await runToken({
      config: configWith({ keyFile }),
      stdout: stdout.stream,
      stderr: stderr.stream,
    });
    expect(stderr.text()).toMatch(
      /^bearer-proxy token: upstream api: a DPoP-bound token \(key ES256, jkt [A-Za-z0-9_-]{43}\): send it as "Authorization: DPoP <token>" with a DPoP proof signed by that key \(RFC 9449\)\n$/,
    );
    expect(code).toBe(0);
    expect(stdout.text()).toMatch(/^eyJ[A-Za-z0-9._-]+\n$/);
    const output = stdout.text() + stderr.text();
    for (const form of await privateKeyForms(keyFile)) expect(output).not.toContain(form);
    expect(output).not.toContain(PROOF_PREFIX);
  });

  it("says that a token bound to an ephemeral key is of no use outside the command", async () => {
    const stderr = capture();
    const code = await runToken({
      config: configWith({}),
      stdout: capture().stream,
      stderr: stderr.stream,
    });
    expect(code).toBe(0);
    expect(stderr.text()).toContain("the key was ephemeral and is gone");
  });
});

describe("bearer-proxy check with dpop", () => {
  it("shows the key, the binding, and probes the API with a DPoP proof", async () => {
    const keyFile = await keys.write("check-cmd.pem", "ed25519");
    const stdout = capture();
    const stderr = capture();
    const code = await runCheck({
      config: configWith({ keyFile }),
      probePath: "/things",
      stdout: stdout.stream,
      stderr: stderr.stream,
    });
    const out = stdout.text();
    expect(stderr.text()).toBe("");
    expect(code).toBe(0);
    expect(out).toMatch(
      new RegExp(
        `✓ DPoP +EdDSA with the Ed25519 key in ${keyFile.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}, jkt [A-Za-z0-9_-]{43}\\n`,
      ),
    );
    expect(out).toMatch(/✓ token .*; token_type DPoP, cnf\.jkt is the key's thumbprint/);
    expect(out).toMatch(/✓ API +GET \/things → 200/);
    // The resource server demanded its nonce: one use_dpop_nonce, then accepted.
    expect(rs.seen.map((r) => r.error ?? r.status)).toEqual(["use_dpop_nonce", 200]);
    expect(rs.seen[1]!.scheme).toBe("DPoP");
    for (const form of await privateKeyForms(keyFile)) expect(out).not.toContain(form);
    expect(out).not.toContain(PROOF_PREFIX);
    expect(out).not.toMatch(/eyJ/);
  });

  it("fails the DPoP step for an unusable key file and skips the token", async () => {
    const keyFile = await keys.write("p384.pem", "ec-p384");
    const stdout = capture();
    const code = await runCheck({
      config: configWith({ keyFile }),
      stdout: stdout.stream,
      stderr: capture().stream,
    });
    expect(code).toBe(1);
    expect(stdout.text()).toMatch(/✗ DPoP +cannot sign DPoP proofs: dpop\.keyFile .*p384\.pem: /);
    expect(stdout.text()).toMatch(/hint: dpop\.keyFile must be a readable, unencrypted PEM/);
    expect(stdout.text()).toMatch(/- token +skipped: no DPoP key to prove possession with/);
  });
});
