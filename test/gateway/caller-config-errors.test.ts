import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig, loadConfigWithWarnings } from "../../src/config/load.js";
import { ConfigError, type ConfigIssue } from "../../src/errors.js";
import { htpasswdLine } from "../helpers/callers-fixture.js";

/**
 * Issue 23: a caller rule that could never match — or a callers source that could never verify
 * anyone — is refused at load, each problem at its field's path, so a typo never becomes a rule
 * that silently matches nobody. Exposing several open upstreams on a non-loopback listener is
 * legal but warned about.
 */

const JWKS = JSON.stringify({
  keys: [{ kty: "EC", crv: "P-256", x: "x", y: "y", kid: "k1", alg: "ES256", use: "sig" }],
});

describe("caller authorization config is checked at load", () => {
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "bp-caller-config-"));
    writeFileSync(join(dir, "users.htpasswd"), `${htpasswdLine("alice", "alice-pw")}\n`);
    writeFileSync(
      join(dir, "md5-users.htpasswd"),
      `${htpasswdLine("alice", "alice-pw")}\nbob:$apr1$salt1234$abcdefghijklmnopqrstuv\n`,
    );
    writeFileSync(join(dir, "jwks.json"), JWKS);
    writeFileSync(join(dir, "ca.pem"), "not used\n");
    writeFileSync(
      join(dir, "token"),
      "eyJhbGciOiJSUzI1NiJ9.e30.c2lnbmF0dXJlLW9mLXRoZS1nYXRld2F5\n",
    );
    writeFileSync(join(dir, "empty-token"), "\n");
    writeFileSync(join(dir, "two-tokens"), "first-token\nsecond-token\n");
    // A folder where the file should be: unreadable for every user, root included (CI).
    mkdirSync(join(dir, "users.d"));
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const upstream = (name: string, extra: Record<string, unknown> = {}) => ({
    name,
    baseUrl: `https://${name}.example.test`,
    clientId: "demo-client",
    clientSecret: "demo-secret",
    match: { pathPrefix: `/${name}` },
    ...extra,
  });

  /** The issues of a document that must not load. */
  const issuesOf = async (doc: Record<string, unknown>): Promise<ConfigIssue[]> => {
    const error = await loadConfig({ configText: JSON.stringify(doc), env: {}, cwd: dir }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ConfigError);
    return [...(error as ConfigError).issues];
  };
  const withAllow = (allow: unknown[], callers: Record<string, unknown> = {}) =>
    issuesOf({ callers, upstreams: [upstream("billing", { allow })] });
  const basic = { basic: { usersFile: "users.htpasswd" } };

  it("refuses a malformed CIDR, naming the rule's path", async () => {
    expect(await withAllow([{ cidr: "10.0.0.0/33" }, { cidr: "nonsense" }])).toEqual([
      {
        path: "upstreams[0] (billing).allow[0].cidr",
        message: expect.stringMatching(/prefix length from 0 to 32.*"33"/),
      },
      {
        path: "upstreams[0] (billing).allow[1].cidr",
        message: expect.stringMatching(/address\/prefix such as 10\.0\.0\.0\/8.*"nonsense"/),
      },
    ]);
  });

  it("refuses an unknown rule key and a rule with two keys", async () => {
    expect(await withAllow([{ team: "x" }])).toEqual([
      {
        path: "upstreams[0] (billing).allow[0].team",
        message: expect.stringContaining("expected one of cidr, user, serviceAccount, namespace"),
      },
    ]);
    expect(await withAllow([{ user: "alice", cidr: "10.0.0.0/8" }], basic)).toEqual([
      { path: "upstreams[0] (billing).allow[0]", message: expect.stringMatching(/more than 1/) },
    ]);
  });

  it("refuses a user the users file does not define, and a user rule without callers.basic", async () => {
    expect(await withAllow([{ user: "mallory" }], basic)).toEqual([
      {
        path: "upstreams[0] (billing).allow[0].user",
        message: expect.stringMatching(/usersFile defines, found "mallory"/),
      },
    ]);
    expect(await withAllow([{ user: "alice" }])).toEqual([
      {
        path: "upstreams[0] (billing).allow[0].user",
        message: expect.stringContaining("expected callers.basic.usersFile to be set"),
      },
    ]);
  });

  it("refuses serviceAccount and namespace rules without callers.kubernetes", async () => {
    expect(await withAllow([{ serviceAccount: "payments/billing" }, { namespace: "ops" }])).toEqual(
      [
        {
          path: "upstreams[0] (billing).allow[0].serviceAccount",
          message: expect.stringContaining("expected callers.kubernetes to be set"),
        },
        {
          path: "upstreams[0] (billing).allow[1].namespace",
          message: expect.stringContaining("expected callers.kubernetes to be set"),
        },
      ],
    );
  });

  it("refuses both and neither of jwksFile and jwksUri, and caFile without jwksUri", async () => {
    const k8s = (kubernetes: Record<string, unknown>) =>
      issuesOf({
        callers: { kubernetes: { issuer: "https://kubernetes.default.svc", ...kubernetes } },
        upstreams: [upstream("billing", { allow: [{ namespace: "ops" }] })],
      });
    expect(await k8s({ jwksFile: "jwks.json", jwksUri: "https://127.0.0.1:6443/jwks" })).toEqual([
      {
        path: "callers.kubernetes",
        message: expect.stringContaining("exactly one of jwksFile and jwksUri, found both"),
      },
    ]);
    expect(await k8s({})).toEqual([
      {
        path: "callers.kubernetes",
        message: expect.stringContaining("exactly one of jwksFile and jwksUri, found neither"),
      },
    ]);
    expect(await k8s({ jwksFile: "jwks.json", caFile: "ca.pem" })).toEqual([
      {
        path: "callers.kubernetes.caFile",
        message: expect.stringContaining("only used with jwksUri"),
      },
    ]);
  });

  it("refuses jwksTokenFile without jwksUri, with a jwksUri that is not https, and when it holds no token", async () => {
    const k8s = (kubernetes: Record<string, unknown>) =>
      issuesOf({
        callers: { kubernetes: { issuer: "https://kubernetes.default.svc", ...kubernetes } },
        upstreams: [upstream("billing", { allow: [{ namespace: "ops" }] })],
      });
    const uri = "https://127.0.0.1:6443/openid/v1/jwks";
    expect(await k8s({ jwksFile: "jwks.json", jwksTokenFile: "token" })).toEqual([
      {
        path: "callers.kubernetes.jwksTokenFile",
        message: expect.stringContaining(
          "only used with jwksUri (it authenticates the JWKS fetch)",
        ),
      },
    ]);
    // The schema wants https:// anyway; the token's own line says what is at stake.
    expect(
      await k8s({ jwksUri: "http://127.0.0.1:8001/openid/v1/jwks", jwksTokenFile: "token" }),
    ).toEqual([
      {
        path: "callers.kubernetes.jwksUri",
        message: expect.stringContaining('expected a string matching /^https:///, found "http://'),
      },
      {
        path: "callers.kubernetes.jwksTokenFile",
        message: expect.stringContaining("not https://: the token would travel in clear text"),
      },
    ]);
    expect(await k8s({ jwksUri: uri, jwksTokenFile: "missing-token" })).toEqual([
      {
        path: "callers.kubernetes.jwksTokenFile",
        message: expect.stringContaining(
          `expected a readable token file, found no such file (${join(dir, "missing-token")})`,
        ),
      },
    ]);
    expect(await k8s({ jwksUri: uri, jwksTokenFile: "empty-token" })).toEqual([
      {
        path: "callers.kubernetes.jwksTokenFile",
        message: expect.stringContaining(
          `expected a bearer token, found an empty file (${join(dir, "empty-token")})`,
        ),
      },
    ]);
    const twoTokens = await k8s({ jwksUri: uri, jwksTokenFile: "two-tokens" });
    expect(twoTokens).toEqual([
      {
        path: "callers.kubernetes.jwksTokenFile",
        message: expect.stringContaining("found text that is not one token"),
      },
    ]);
    expect(JSON.stringify(twoTokens)).not.toContain("second-token");
  });

  it("accepts jwksTokenFile with an https jwksUri, resolved against the config's folder", async () => {
    const config = await loadConfig({
      configText: JSON.stringify({
        callers: {
          kubernetes: {
            issuer: "https://kubernetes.default.svc",
            jwksUri: "https://kubernetes.default.svc/openid/v1/jwks",
            jwksTokenFile: "token",
          },
        },
        upstreams: [upstream("billing", { allow: [{ namespace: "ops" }] })],
      }),
      env: {},
      cwd: dir,
    });
    expect(config.callers.kubernetes?.jwksTokenFile).toBe(join(dir, "token"));
  });

  it("refuses a missing or unreadable users file", async () => {
    expect(
      await withAllow([{ user: "alice" }], { basic: { usersFile: "missing.htpasswd" } }),
    ).toEqual([
      {
        path: "callers.basic.usersFile",
        message: expect.stringMatching(/readable htpasswd file, found no such file/),
      },
    ]);
    expect(await withAllow([{ user: "alice" }], { basic: { usersFile: "users.d" } })).toEqual([
      {
        path: "callers.basic.usersFile",
        message: expect.stringMatching(/readable htpasswd file, found it unreadable \(EISDIR\)/),
      },
    ]);
  });

  it("refuses a users file with a non-bcrypt line, naming the line and user but not the hash", async () => {
    const issues = await withAllow([{ user: "alice" }], {
      basic: { usersFile: "md5-users.htpasswd" },
    });
    expect(issues).toEqual([
      {
        path: "callers.basic.usersFile",
        message: expect.stringMatching(/md5-users\.htpasswd line 2: user "bob" has no bcrypt hash/),
      },
    ]);
    expect(issues[0]!.message).not.toContain("$apr1$");
  });

  describe("the open-gateway warning", () => {
    const warningsOf = async (host: string, allowOnFirst?: unknown[]) =>
      (
        await loadConfigWithWarnings({
          configText: JSON.stringify({
            listen: { host, port: 0 },
            upstreams: [
              upstream("billing", allowOnFirst ? { allow: allowOnFirst } : {}),
              upstream("files"),
            ],
          }),
          env: {},
          cwd: dir,
        })
      ).warnings;

    it("warns when two upstreams on a non-loopback listener have no allow", async () => {
      const warnings = await warningsOf("0.0.0.0");
      const open = warnings.filter((w) => w.includes("none has an allow list"));
      expect(open).toHaveLength(1);
      expect(open[0]).toMatch(/^upstreams: 2 upstreams listen on a non-loopback address/);
      expect(open[0]).toContain("anyone who can reach the port uses every credential");
    });

    it("does not warn once one upstream has an allow list, nor on 127.0.0.1", async () => {
      const guarded = await warningsOf("0.0.0.0", [{ cidr: "10.0.0.0/8" }]);
      expect(guarded.filter((w) => w.includes("allow list"))).toEqual([]);
      const loopback = await warningsOf("127.0.0.1");
      expect(loopback.filter((w) => w.includes("allow list"))).toEqual([]);
    });
  });
});
