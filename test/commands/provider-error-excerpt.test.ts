/**
 * Issue #22: `bearer-proxy token` and `check` print what a provider that does not answer RFC
 * 6749 errors said (the scrubbed excerpt /status shows), never the client secret.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCheck } from "../../src/commands/check.js";
import { runToken } from "../../src/commands/token.js";
import { generateCertificates } from "../helpers/tls.js";
import { makeUpstreamConfig } from "../helpers/upstream-config.js";
import { capture, configFor } from "./helpers.js";

const CLIENT_ID = "excerpt-client";
/** Characters that form- and percent-encoding change, so every sent form is exercised. */
const SECRET = "planted s3cr+t/value=9&x";

interface Answer {
  status: number;
  body: string;
}

/** Real error bodies of providers that do not answer RFC 6749 §5.2 errors. */
const SHAPES: { provider: string; answer: Answer; said: string }[] = [
  {
    provider: "Apigee",
    answer: { status: 401, body: '{"ErrorCode":"invalid_client","Error":"ClientId is Invalid"}' },
    said: '{"ErrorCode":"invalid_client","Error":"ClientId is Invalid"}',
  },
  {
    provider: "Twitch",
    answer: { status: 403, body: '{"status":403,"message":"invalid client secret"}' },
    said: '{"status":403,"message":"invalid client secret"}',
  },
  {
    provider: "Graph / Facebook",
    answer: {
      status: 401,
      body: '{\n  "error": {\n    "message": "Error validating client secret.",\n    "type": "OAuthException",\n    "code": 1\n  }\n}',
    },
    said: '{"error":{"message":"Error validating client secret.","type":"OAuthException","code":1}}',
  },
  {
    provider: "reddit",
    answer: { status: 401, body: '{"message":"Unauthorized","error":401}' },
    said: '{"message":"Unauthorized","error":401}',
  },
];

describe("issue #22: token and check show a provider's non-RFC 6749 error", () => {
  let server: Server;
  let url: string;
  let dir: string;
  let caFile: string;
  let answer: Answer = SHAPES[0]!.answer;

  beforeAll(async () => {
    const certificates = await generateCertificates();
    dir = mkdtempSync(join(tmpdir(), "bp-excerpt-"));
    caFile = join(dir, "ca.pem");
    writeFileSync(caFile, certificates.caPem);
    server = createServer({ cert: certificates.certPem, key: certificates.keyPem }, (req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(answer.status, { "content-type": "application/json" });
        res.end(answer.body);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  const config = () =>
    configFor(
      makeUpstreamConfig("provider", {
        baseUrl: url,
        clientId: CLIENT_ID,
        clientSecret: SECRET,
        tls: { caFile },
      }),
    );

  async function token() {
    const stdout = capture();
    const stderr = capture();
    const code = await runToken({ config: config(), stdout: stdout.stream, stderr: stderr.stream });
    return { code, stdout: stdout.text(), stderr: stderr.text() };
  }

  async function check() {
    const stdout = capture();
    const stderr = capture();
    const code = await runCheck({ config: config(), stdout: stdout.stream, stderr: stderr.stream });
    return { code, stdout: stdout.text(), stderr: stderr.text() };
  }

  /** Every form of our secret a careless provider could echo. */
  const secretForms = [
    SECRET,
    encodeURIComponent(SECRET),
    new URLSearchParams([["", SECRET]]).toString().slice(1),
  ];

  for (const shape of SHAPES) {
    it(`token prints what ${shape.provider} said (${shape.answer.status})`, async () => {
      answer = shape.answer;
      const { code, stdout, stderr } = await token();
      expect(code).toBe(1);
      expect(stdout).toBe("");
      expect(stderr).toContain(`answered ${shape.answer.status} (content type application/json)`);
      expect(stderr).toContain(`bearer-proxy token: upstream provider: body: ${shape.said}\n`);
    });

    it(`check prints what ${shape.provider} said (${shape.answer.status})`, async () => {
      answer = shape.answer;
      const { code, stdout } = await check();
      expect(code).toBe(1);
      expect(stdout).toMatch(/✗ token +token endpoint .* answered 40[13] \(content type/);
      expect(stdout).toContain(`           body: ${shape.said}\n`);
    });
  }

  it("never prints a client secret the provider echoes back, in any form", async () => {
    const echoed = secretForms.join(" and ");
    answer = {
      status: 403,
      body: JSON.stringify({ status: 403, message: `invalid client secret ${echoed}` }),
    };
    const fromToken = await token();
    const fromCheck = await check();
    const said =
      '{"status":403,"message":"invalid client secret [redacted] and [redacted] and [redacted]"}';
    expect(fromToken.stderr).toContain(`bearer-proxy token: upstream provider: body: ${said}\n`);
    expect(fromCheck.stdout).toContain(`           body: ${said}\n`);
    for (const output of [fromToken.stdout, fromToken.stderr, fromCheck.stdout, fromCheck.stderr]) {
      for (const form of secretForms) expect(output).not.toContain(form);
      // Nor a recognisable part of it.
      expect(output).not.toContain("s3cr");
    }
  });
});
