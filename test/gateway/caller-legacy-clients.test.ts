import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import {
  accessLines,
  adminPages,
  basicValue,
  echoedHeader,
  echoedHeaderNames,
  errorCode,
  expectNoSecrets,
  htpasswdFile,
} from "../helpers/callers-fixture.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { createTestPki } from "../helpers/tls.js";
import { waitFor } from "../helpers/wait.js";

/**
 * Issue 23: legacy tools reach a guarded upstream through `http_proxy=http://user:pass@host:port`
 * as they really do — curl, Python's urllib, git (no credential first, then Basic after the 407)
 * and wget — with absolute-form requests routed by `match.hosts`. The upstream never sees
 * Proxy-Authorization.
 */

const run = promisify(execFile);
const which = (tool: string) =>
  run("which", [tool]).then(
    () => true,
    () => false,
  );
const HAS_CURL = await which("curl");
const HAS_PYTHON = await which("python3");
const HAS_GIT = await which("git");
const HAS_WGET = await which("wget");

/** A test name that says why it is skipped when `tool` is not on PATH (CI installs none). */
const needs = (tool: string, present: boolean) =>
  present ? "" : ` [skipped: ${tool} is not on PATH; CI installs no extra tools]`;

const CRON = { user: "reporting-cron", password: "cron-Pw9xQ" };
/** RFC 7617: the password may hold ':' (the user-id cannot); '@' must be percent-encoded in a URL. */
const ETL = { user: "etl", password: "s3cret:with@colon" };
const OUTSIDER = { user: "outsider", password: "outsider-pw" };

describe("legacy clients through http_proxy with caller authorization", () => {
  let emulator: Emulator;
  let gateway: AppUnderTest;
  let home: string;
  /** Everything a client printed: must hold no credential either. */
  const outputs: string[] = [];

  const proxyUrl = (who: { user: string; password: string }) =>
    `http://${encodeURIComponent(who.user)}:${encodeURIComponent(who.password)}@${new URL(gateway.url).host}`;

  /** A child environment without the runner's proxy settings, HOME in a temp folder. */
  const envWith = (extra: Record<string, string>) => {
    const env: Record<string, string> = {};
    for (const [key, value] of Object.entries(process.env)) {
      if (value !== undefined && !/^(https?|all|no)_proxy$/i.test(key)) env[key] = value;
    }
    return { ...env, HOME: home, ...extra };
  };

  beforeAll(async () => {
    home = mkdtempSync(join(tmpdir(), "bp-legacy-home-"));
    const pki = await createTestPki();
    emulator = await startTlsEmulator(pki);
    gateway = await startAppUnderTest({
      caPem: pki.caPem,
      files: {
        "callers.htpasswd": htpasswdFile({
          [CRON.user]: CRON.password,
          [ETL.user]: ETL.password,
          [OUTSIDER.user]: OUTSIDER.password,
        }),
      },
      config: {
        callers: { basic: { usersFile: "callers.htpasswd" } },
        upstreams: [
          {
            name: "billing",
            baseUrl: emulator.url,
            clientId: "demo-client",
            clientSecret: "demo-secret",
            match: { hosts: ["billing.internal"] },
            allow: [{ user: CRON.user }, { user: ETL.user }],
          },
        ],
      },
    });
  });
  afterAll(async () => {
    await gateway?.close();
    await emulator?.close();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  /** The upstream's view of a request: no Proxy-Authorization, the injected bearer token. */
  const expectUpstreamSawNoProxyCredential = (echo: string) => {
    expect(echoedHeaderNames(echo)).not.toContain("proxy-authorization");
    expect(echoedHeader(echo, "authorization")).toMatch(/^Bearer /);
  };

  it.skipIf(!HAS_CURL)(
    `curl -x http://user:pass@… reaches the upstream (absolute-form)${needs("curl", HAS_CURL)}`,
    async () => {
      const { stdout } = await run(
        "curl",
        ["-s", "-x", proxyUrl(CRON), "http://billing.internal/echo"],
        { env: envWith({}), timeout: 10_000 },
      );
      outputs.push(stdout);
      expectUpstreamSawNoProxyCredential(stdout);
      expect(JSON.parse(stdout).url).toBe("/echo");
      const line = accessLines(gateway.records).at(-1)!;
      expect(line).toMatchObject({ upstream: "billing", status: 200, caller: `user:${CRON.user}` });
    },
  );

  it.skipIf(!HAS_CURL)(
    `curl without a credential gets 407 with the Basic challenge; a non-listed user 403${needs("curl", HAS_CURL)}`,
    async () => {
      const { stdout } = await run(
        "curl",
        ["-s", "-i", "-x", `http://${new URL(gateway.url).host}`, "http://billing.internal/echo"],
        { env: envWith({}), timeout: 10_000 },
      );
      outputs.push(stdout);
      expect(stdout).toMatch(/^HTTP\/1\.1 407 /);
      expect(stdout).toMatch(/^proxy-authenticate: Basic realm="bearer-proxy"\r$/im);
      expect(stdout).not.toMatch(/Bearer realm/); // no callers.kubernetes: no Bearer challenge
      const outsider = await run(
        "curl",
        ["-s", "-w", "\n%{http_code}", "-x", proxyUrl(OUTSIDER), "http://billing.internal/echo"],
        { env: envWith({}), timeout: 10_000 },
      );
      outputs.push(outsider.stdout);
      const [body, status] = outsider.stdout.split("\n");
      expect(status).toBe("403");
      expect(errorCode(body!)).toBe("caller_not_allowed");
    },
  );

  it.skipIf(!HAS_PYTHON)(
    `Python urllib with http_proxy (a password holding ':' and '@')${needs("python3", HAS_PYTHON)}`,
    async () => {
      const script = [
        "import sys, urllib.request",
        "r = urllib.request.urlopen('http://billing.internal/echo', timeout=10)",
        "sys.stdout.write(str(r.status) + '\\n' + r.read().decode())",
      ].join("\n");
      const { stdout } = await run("python3", ["-c", script], {
        env: envWith({ http_proxy: proxyUrl(ETL) }),
        timeout: 10_000,
      });
      outputs.push(stdout);
      const [status, ...rest] = stdout.split("\n");
      expect(status).toBe("200");
      expectUpstreamSawNoProxyCredential(rest.join("\n"));
      expect(accessLines(gateway.records).at(-1)).toMatchObject({
        status: 200,
        caller: `user:${ETL.user}`,
      });
    },
  );

  it.skipIf(!HAS_GIT)(
    `git ls-remote: a bare first try gets 407, git answers the Basic challenge and passes the gate${needs("git", HAS_GIT)}`,
    async () => {
      const before = accessLines(gateway.records).length;
      // The emulator speaks no git: git fails after the gate let it through. What matters is how.
      const result = await run("git", ["ls-remote", "http://billing.internal/repo.git"], {
        env: envWith({
          http_proxy: proxyUrl(CRON),
          GIT_TERMINAL_PROMPT: "0",
          GIT_CONFIG_NOSYSTEM: "1",
          GIT_CONFIG_GLOBAL: "/dev/null",
        }),
        timeout: 10_000,
      }).then(
        (r) => ({ code: 0, ...r }),
        (e: { code: number; stdout: string; stderr: string }) => e,
      );
      outputs.push(result.stdout, result.stderr);
      expect(result.code).not.toBe(0);
      await waitFor(() => accessLines(gateway.records).length >= before + 2, "git's two attempts");
      const lines = accessLines(gateway.records).slice(before);
      expect(lines[0]).toMatchObject({
        path: "/repo.git/info/refs",
        status: 407,
        caller: "addr:127.0.0.1",
        errorCode: "caller_unauthenticated",
      });
      expect(lines[1]).toMatchObject({ path: "/repo.git/info/refs", caller: `user:${CRON.user}` });
      expect(lines[1]!.status).not.toBe(407);
      expect(lines[1]!.errorCode).toBeUndefined();
    },
  );

  it.skipIf(!HAS_WGET)(
    `wget with http_proxy reaches the upstream${needs("wget", HAS_WGET)}`,
    async () => {
      const { stdout } = await run("wget", ["-q", "-O", "-", "http://billing.internal/echo"], {
        env: envWith({ http_proxy: proxyUrl(CRON) }),
        timeout: 10_000,
      });
      outputs.push(stdout);
      expectUpstreamSawNoProxyCredential(stdout);
      expect(accessLines(gateway.records).at(-1)).toMatchObject({
        status: 200,
        caller: `user:${CRON.user}`,
      });
    },
  );

  it("no password or Basic value in any log line, client output, /status or /metrics", async () => {
    const secrets = [CRON, ETL, OUTSIDER].flatMap((who) => [
      who.password,
      encodeURIComponent(who.password),
      basicValue(who.user, who.password),
    ]);
    expectNoSecrets(
      {
        logs: gateway.lines,
        outputs,
        ...(await adminPages(gateway.adminUrl)),
      },
      secrets,
    );
  });
});
