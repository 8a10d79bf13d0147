/**
 * Issue 16: a bad secret is diagnosable on every provider. When a provider answers with a body
 * that is not an RFC 6749 error (Apigee's `{"ErrorCode":…}`, an HTML page), a scrubbed excerpt of
 * it reaches the log line, /status `lastError` and `bearer-proxy check`; when the id or secret
 * holds characters that form encoding changes, the hint names `basicEncoding`.
 */
import { describe, expect, it } from "vitest";
import { runCheck } from "../../src/commands/check.js";
import { capture } from "../commands/helpers.js";
import { loadTestConfig, startAppUnderTest } from "../helpers/app-under-test.js";
import { apigee } from "./profiles/apigee.js";
import { inHouseLegacy, SPECIAL_CLIENT } from "./profiles/in-house-legacy.js";
import type { IdpProfile } from "./support/idp-kit.js";
import { type RunningProfile, upstreamFile, useProfileServer } from "./support/run-profile.js";

const WRONG_SECRET = "Wr0ngSecretValue";
const APIGEE_EXCERPT = '{"ErrorCode":"invalid_client","Error":"ClientId is Invalid"}';

async function check(
  profile: IdpProfile,
  running: RunningProfile,
  extra: Parameters<typeof upstreamFile>[2],
) {
  const loaded = await loadTestConfig({
    config: { upstreams: [upstreamFile(profile, running.server.origin, extra)] },
    caPem: running.caPem,
  });
  try {
    const stdout = capture();
    const stderr = capture();
    const code = await runCheck({
      config: loaded.config,
      stdout: stdout.stream,
      stderr: stderr.stream,
    });
    return { code, stdout: stdout.text() };
  } finally {
    loaded.cleanup();
  }
}

describe("Apigee with a wrong secret", () => {
  const running = useProfileServer(apigee);

  it("the proxy logs and reports the excerpt; clients get the coded error without it", async () => {
    const aut = await startAppUnderTest({
      config: {
        upstreams: [
          upstreamFile(apigee, running().server.origin, {
            clientSecret: WRONG_SECRET,
            token: { acceptTokenTypes: ["Bearer", "BearerToken"], waitTimeout: "3s" },
          }),
        ],
      },
      caPem: running().caPem,
    });
    try {
      const response = await fetch(`${aut.url}/echo/x`);
      const body = (await response.json()) as { error: { code: string; message: string } };
      expect(response.status).toBe(502);
      expect(body.error.code).toBe("token_rejected");
      expect(body.error.message).not.toContain("ClientId is Invalid");

      const status = (await (await fetch(`${aut.adminUrl}/status`)).json()) as {
        upstreams: { token: { lastError: { code: string; excerpt?: string } | null } }[];
      };
      expect(status.upstreams[0]!.token.lastError).toMatchObject({
        code: "token_rejected",
        excerpt: APIGEE_EXCERPT,
      });

      const failure = aut.records.find((r) => r.bodyExcerpt !== undefined);
      expect(failure).toMatchObject({
        level: "error",
        bodyExcerpt: APIGEE_EXCERPT,
        msg: "the token endpoint rejected the client credentials: check clientId/clientSecret",
      });
      const everything = aut.lines.join("\n");
      expect(everything).not.toContain(WRONG_SECRET);
      expect(everything).not.toContain(apigee.client.secret);
    } finally {
      await aut.close();
    }
  });

  it("bearer-proxy check prints the excerpt under the failed token step", async () => {
    const { code, stdout } = await check(apigee, running(), {
      clientSecret: WRONG_SECRET,
      token: { acceptTokenTypes: ["Bearer", "BearerToken"] },
    });
    expect(code).toBe(1);
    expect(stdout).toContain("✗ token");
    expect(stdout).toContain(`           body: ${APIGEE_EXCERPT}\n`);
    expect(stdout).toContain("hint: the credentials were refused: check clientId / clientSecret");
    expect(stdout).not.toContain(WRONG_SECRET);
  });

  it("bearer-proxy check names token.acceptTokenTypes when BearerToken is not accepted", async () => {
    const { code, stdout } = await check(apigee, running(), { token: {} });
    expect(code).toBe(1);
    expect(stdout).toContain('add "BearerToken" to token.acceptTokenTypes');
  });
});

describe("an old server that does not form-decode Basic credentials", () => {
  const running = useProfileServer(inHouseLegacy);

  it("check: the hint names basicEncoding: raw, and the HTML page is shown as text", async () => {
    const { code, stdout } = await check(inHouseLegacy, running(), {
      clientId: SPECIAL_CLIENT.id,
      clientSecret: SPECIAL_CLIENT.secret,
    });
    expect(code).toBe(1);
    expect(stdout).toMatch(
      /hint: the token endpoint rejected the client credentials; the client secret contains characters that clientAuth: basic form-encodes before Base64 \(RFC 6749 §2\.3\.1\), which some servers do not decode \(old Spring Security OAuth2, others\): if the client secret is right, set upstreams\[\]\.basicEncoding: raw \(or clientAuth: body\)/,
    );
    expect(stdout).toContain("body: Error 401 Unauthorized HTTP ERROR 401");
    expect(stdout).not.toContain(SPECIAL_CLIENT.secret);
  });

  it("check: a token from a text/plain form body, fingerprint only", async () => {
    const { code, stdout } = await check(inHouseLegacy, running(), {});
    expect(code).toBe(0);
    expect(stdout).toMatch(/✓ token +200 from .* lifetime 3600 s; token fingerprint [0-9a-f]{8}/);
    expect(stdout).not.toContain("5f0e2d1c-legacy");
  });
});
