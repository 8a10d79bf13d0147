import type { AddressInfo } from "node:net";
import { createServer, type Server } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { runCheck } from "../../src/commands/check.js";
import type { ProxyConfig } from "../../src/config/proxy-config.js";
import { startEmulator } from "../../src/emulator/emulator.js";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { useEmulator } from "../helpers/emulator.js";
import { createTestPki } from "../helpers/tls.js";
import { capture, configFor, emulatorUpstream } from "./helpers.js";

const SECRET = "check-cmd-secret-2b9e";
const WRONG_SECRET = "check-wrong-secret-77d1";

async function check(config: ProxyConfig, options: { probePath?: string; upstream?: string } = {}) {
  const stdout = capture();
  const stderr = capture();
  const code = await runCheck({ config, ...options, stdout: stdout.stream, stderr: stderr.stream });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

/** The step lines (✓/✗/-) of the output, with timings and dates replaced for stable comparison. */
function steps(output: string): string[] {
  return output
    .split("\n")
    .filter((line) => /^ {2}[✓✗-] /.test(line))
    .map((line) => line.trim().split(/\s+/).slice(0, 2).join(" "));
}

describe("bearer-proxy check against the emulator", () => {
  const emulator = useEmulator({ clients: [{ clientId: "check-client", clientSecret: SECRET }] });
  const good = () =>
    emulatorUpstream(emulator(), { clientId: "check-client", clientSecret: SECRET });

  it("passes every step, with certificate and token details, and an API probe", async () => {
    const { code, stdout, stderr } = await check(configFor(good()), {
      probePath: "/platform/v1/spreadsheets/abc",
    });
    expect(stderr).toBe("");
    expect(code).toBe(0);
    expect(steps(stdout)).toEqual(["✓ DNS", "✓ TCP", "✓ TLS", "✓ token", "✓ API"]);
    expect(stdout).toContain(`upstream emu: ${emulator().url} (API version default)`);
    expect(stdout).toMatch(/✓ TCP +connected to 127\.0\.0\.1:\d+ in \d+ ms/);
    expect(stdout).toMatch(
      /✓ TLS +TLSv1\.3, subject CN=localhost, SAN .*IP Address:127\.0\.0\.1.*, issuer CN=.+, valid until \d{4}-\d\d-\d\d \(\d+ days left\), matches 127\.0\.0\.1/,
    );
    expect(stdout).toMatch(
      /✓ token +200 from https:\/\/127\.0\.0\.1:\d+\/iam\/v1\/oauth2\/token in \d+ ms; granted scope "files:read files:write"; lifetime 599 s; token fingerprint [0-9a-f]{8}/,
    );
    expect(stdout).toMatch(/✓ API +GET \/platform\/v1\/spreadsheets\/abc → 200 in \d+ ms/);
    expect(stdout).toMatch(/all checks passed\n$/);
    expect(stdout).not.toContain(SECRET);
    // The emulator's tokens are JWT-shaped (eyJ...); only the fingerprint may appear.
    expect(stdout).not.toMatch(/eyJ/);
  });

  it("resolves host names (localhost) before connecting", async () => {
    const byName = { ...emulator(), url: emulator().url.replace("127.0.0.1", "localhost") };
    const { code, stdout } = await check(
      configFor(emulatorUpstream(byName, { clientId: "check-client", clientSecret: SECRET })),
    );
    expect(stdout).toMatch(/✓ DNS +localhost → .*127\.0\.0\.1/);
    expect(stdout).toMatch(/✓ TLS .*matches localhost/);
    expect(code).toBe(0);
  });

  it("checks the scripting preview's token path and X-Version", async () => {
    const preview = emulatorUpstream(emulator(), {
      preview: true,
      clientId: "check-client",
      clientSecret: SECRET,
    });
    const { code, stdout } = await check(configFor(preview), { probePath: "/scripts" });
    expect(code).toBe(0);
    expect(stdout).toMatch(/✓ token +200 from https:\/\/127\.0\.0\.1:\d+\/oauth2\/token/);
    expect(stdout).toMatch(/✓ API +GET \/scripts → 200/);
  });

  it("explains a wrong client secret, without printing it", async () => {
    const wrong = emulatorUpstream(emulator(), {
      clientId: "check-client",
      clientSecret: WRONG_SECRET,
    });
    const { code, stdout, stderr } = await check(configFor(wrong), { probePath: "/scripts" });
    expect(code).toBe(1);
    expect(steps(stdout)).toEqual(["✓ DNS", "✓ TCP", "✓ TLS", "✗ token", "- API"]);
    expect(stdout).toMatch(
      /✗ token +token endpoint https:\/\/127\.0\.0\.1:\d+\/iam\/v1\/oauth2\/token answered 401 \(invalid_client: client authentication failed\)/,
    );
    expect(stdout).toContain(
      "hint: the token endpoint says invalid_client: check clientId / clientSecret (and clientAuth: body or basic)",
    );
    expect(stdout).toContain("- API    skipped: no token");
    expect(stderr).toBe("\nbearer-proxy check: 1 check failed\n");
    expect(stdout + stderr).not.toContain(WRONG_SECRET);
  });

  it("explains an untrusted CA and skips the token request", async () => {
    const before = emulator().stats().tokenRequests.total;
    const { code, stdout } = await check(
      configFor(
        emulatorUpstream(emulator(), {
          trustCa: false,
          clientId: "check-client",
          clientSecret: SECRET,
        }),
      ),
    );
    expect(code).toBe(1);
    expect(steps(stdout)).toEqual(["✓ DNS", "✓ TCP", "✗ TLS", "- token"]);
    expect(stdout).toMatch(
      /✗ TLS +certificate not trusted \([A-Z_]+\): TLSv1\.3, subject CN=localhost/,
    );
    expect(stdout).toMatch(
      /hint: it is signed by ".+", a CA this machine does not trust: set tls\.caFile to the CA that signed it/,
    );
    expect(emulator().stats().tokenRequests.total).toBe(before);
  });

  it("explains a certificate that does not match the server name", async () => {
    const { code, stdout } = await check(
      configFor(
        emulatorUpstream(emulator(), {
          serverName: "wrong-host.invalid",
          clientId: "check-client",
          clientSecret: SECRET,
        }),
      ),
    );
    expect(code).toBe(1);
    expect(stdout).toMatch(/✗ TLS +certificate does not match wrong-host\.invalid/);
    expect(stdout).toMatch(
      /hint: the certificate is for .*DNS:localhost.*: use one of those names in the URL, or set tls\.serverName/,
    );
  });

  it("explains a token URL with no token endpoint behind it", async () => {
    const { code, stdout } = await check(
      configFor(
        emulatorUpstream(emulator(), {
          tokenPath: "/v2/token",
          clientId: "check-client",
          clientSecret: SECRET,
        }),
      ),
    );
    expect(code).toBe(1);
    expect(stdout).toMatch(
      /✗ token +token endpoint https:\/\/127\.0\.0\.1:\d+\/v2\/token answered 404/,
    );
    expect(stdout).toContain("hint: no token endpoint at");
  });

  it("reports a failing API probe with a hint", async () => {
    const { code, stdout } = await check(configFor(good()), {
      probePath: "/platform/v1/nothing-here",
    });
    expect(code).toBe(1);
    expect(stdout).toMatch(/✗ API +GET \/platform\/v1\/nothing-here → 404/);
    expect(stdout).toContain("hint: no such path");
  });

  describe("--probe-path goes to the upstreams it routes to (issue 32)", () => {
    /** The demo's shape: default version at /, the scripting preview at /scripts. */
    const demoLike = () =>
      configFor(
        { ...good(), name: "sheets" },
        {
          ...emulatorUpstream(emulator(), {
            name: "scripts",
            preview: true,
            clientId: "check-client",
            clientSecret: SECRET,
          }),
          match: { pathPrefix: "/scripts", hosts: [] },
        },
      );

    it("probes /platform/v1/... at sheets only; scripts says where the path goes", async () => {
      const { code, stdout, stderr } = await check(demoLike(), {
        probePath: "/platform/v1/spreadsheets/abc",
      });
      expect(stderr).toBe("");
      expect(code).toBe(0);
      expect(steps(stdout)).toEqual([
        ...["✓ DNS", "✓ TCP", "✓ TLS", "✓ token", "✓ API"],
        ...["✓ DNS", "✓ TCP", "✓ TLS", "✓ token", "- API"],
      ]);
      expect(stdout).toMatch(/✓ API +GET \/platform\/v1\/spreadsheets\/abc → 200/);
      expect(stdout).toContain(
        "- API    skipped: /platform/v1/spreadsheets/abc routes to upstream sheets",
      );
    });

    it("probes /scripts at scripts only", async () => {
      const { code, stdout } = await check(demoLike(), { probePath: "/scripts" });
      expect(code).toBe(0);
      expect(stdout).toContain("- API    skipped: /scripts routes to upstream scripts");
      expect(stdout).toMatch(/✓ API +GET \/scripts → 200/);
    });

    it("sends the path the proxy would send: stripPrefix and the base path apply", async () => {
      const stripped = {
        ...good(),
        match: { pathPrefix: "/emu", hosts: [] },
        stripPrefix: true,
      };
      const { code, stdout } = await check(configFor(stripped), {
        probePath: "/emu/platform/v1/spreadsheets/abc",
      });
      expect(code).toBe(0);
      expect(stdout).toMatch(
        /✓ API +GET \/emu\/platform\/v1\/spreadsheets\/abc \(sent as \/platform\/v1\/spreadsheets\/abc\) → 200/,
      );
    });

    it("fails when the path routes to none of the upstreams checked, naming where it goes", async () => {
      const elsewhere = await check(demoLike(), {
        upstream: "scripts",
        probePath: "/platform/v1/spreadsheets/abc",
      });
      expect(elsewhere.code).toBe(1);
      expect(elsewhere.stderr).toBe(
        "\nbearer-proxy check: --probe-path /platform/v1/spreadsheets/abc was probed nowhere: it routes to upstream sheets (check it with --upstream sheets)\n",
      );
      const onlyScripts = configFor({
        ...emulatorUpstream(emulator(), { name: "scripts", preview: true }),
        match: { pathPrefix: "/scripts", hosts: [] },
      });
      const nowhere = await check(onlyScripts, { probePath: "/platform/v1/x" });
      expect(nowhere.code).toBe(1);
      expect(nowhere.stdout).toContain(
        "- API    skipped: /platform/v1/x matches none of this upstream's routes",
      );
      expect(nowhere.stderr).toContain(
        "--probe-path /platform/v1/x was probed nowhere: no route of the upstreams checked matches it",
      );
    });
  });

  it("checks only the named upstream, and refuses an unknown name", async () => {
    const config = configFor(
      good(),
      emulatorUpstream(emulator(), { name: "other", trustCa: false }),
    );
    const only = await check(config, { upstream: "emu" });
    expect(only.code).toBe(0);
    expect(only.stdout).not.toContain("upstream other");
    const all = await check(config);
    expect(all.code).toBe(1);
    expect(all.stdout).toContain("upstream other");
    const unknown = await check(config, { upstream: "nope" });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toBe(
      'bearer-proxy check: no upstream named "nope"; configured: emu, other\n',
    );
  });
});

describe("bearer-proxy check: network and certificate failures", () => {
  let closed: Server | undefined;
  let expired: Emulator | undefined;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  beforeAll(async () => {
    pki = await createTestPki();
  });
  afterEach(async () => {
    await expired?.close();
    expired = undefined;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => (closed ? closed.close(() => resolve()) : resolve()));
  });

  it("explains a refused connection", async () => {
    // Reserve a free port, then release it so nothing listens there.
    closed = createServer();
    await new Promise<void>((resolve) => closed!.listen(0, "127.0.0.1", resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((resolve) => closed!.close(() => resolve()));
    closed = undefined;
    const fake = { url: `https://127.0.0.1:${port}`, caFile: "/nonexistent" } as Emulator;
    const { code, stdout } = await check(configFor(emulatorUpstream(fake, { trustCa: false })));
    expect(code).toBe(1);
    expect(steps(stdout)).toEqual(["✓ DNS", "✗ TCP", "- TLS", "- token"]);
    expect(stdout).toContain(`cannot connect to 127.0.0.1:${port} (ECONNREFUSED)`);
    expect(stdout).toContain(
      "hint: nothing listens there: check the port in the URL and that the service is up",
    );
  });

  it("explains an expired certificate", async () => {
    expired = await startEmulator({
      host: "127.0.0.1",
      port: 0,
      tls: { ...pki.expired, caPem: pki.caPem },
    });
    const { code, stdout } = await check(configFor(emulatorUpstream(expired)));
    expect(code).toBe(1);
    expect(stdout).toMatch(/✗ TLS +certificate expired: .*\(-\d+ days left\)/);
    expect(stdout).toContain("hint: the server's certificate has expired");
  });
});
