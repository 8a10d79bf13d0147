/** Flags > env > file > defaults, and how env/flag problems are named. */
import { resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadConfigWithWarnings } from "../../src/config/load.js";
import {
  issuesOf,
  issuesOfText,
  pemCaFile,
  removeTempDirs,
  UPSTREAM,
  yaml,
} from "./load-helpers.js";

afterAll(removeTempDirs);

const FILE = yaml`
  listen: { host: 0.0.0.0, port: 7000 }
  log: { level: debug }
  upstreams:
    - name: api
      baseUrl: https://file.example.com
      clientId: file-id
      clientSecretFile: /etc/hostname
`;

describe("precedence", () => {
  it("uses defaults, then the file, then env, then flags", async () => {
    const load = (env: Record<string, string>, flags = {}) =>
      loadConfigWithWarnings({ configText: FILE, env, flags }).then((r) => r.config);

    const fromFile = await load({});
    expect([fromFile.listen, fromFile.log, fromFile.admin]).toEqual([
      { host: "0.0.0.0", port: 7000 },
      { level: "debug", format: "json" },
      { host: "127.0.0.1", port: 9901 },
    ]);
    expect(fromFile.upstreams[0]?.baseUrl).toBe("https://file.example.com");

    const env = {
      BEARER_PROXY_LISTEN: "127.0.0.2:7001",
      BEARER_PROXY_LOG_LEVEL: "warn",
      BEARER_PROXY_BASE_URL: "https://env.example.com",
      BEARER_PROXY_ADMIN_LISTEN: "[::1]:9902",
    };
    const fromEnv = await load(env);
    expect([fromEnv.listen, fromEnv.log.level, fromEnv.admin]).toEqual([
      { host: "127.0.0.2", port: 7001 },
      "warn",
      { host: "::1", port: 9902 },
    ]);
    expect(fromEnv.upstreams[0]?.baseUrl).toBe("https://env.example.com");

    const fromFlags = await load(env, {
      listen: "127.0.0.3:7002",
      logLevel: "error",
      logFormat: "pretty",
      baseUrl: "https://flag.example.com",
    });
    expect([fromFlags.listen, fromFlags.log]).toEqual([
      { host: "127.0.0.3", port: 7002 },
      { level: "error", format: "pretty" },
    ]);
    expect(fromFlags.upstreams[0]?.baseUrl).toBe("https://flag.example.com");
    expect(fromFlags.admin).toEqual({ host: "::1", port: 9902 }); // env still applies where no flag is given
  });

  it("replaces both halves of a credential pair from a higher source", async () => {
    const { config } = await loadConfigWithWarnings({
      configText: FILE,
      env: {
        BEARER_PROXY_CLIENT_SECRET: "env-secret",
        BEARER_PROXY_CLIENT_ID_FILE: "/etc/hostname",
      },
      flags: { clientId: "flag-id" },
    });
    const token = config.upstreams[0]!.token;
    expect(token.clientSecret).toEqual({ kind: "inline", value: "env-secret" });
    expect(token.clientId).toEqual({ kind: "inline", value: "flag-id" });
  });

  it("applies upstream-level settings to the single upstream of a file", async () => {
    const { config } = await loadConfigWithWarnings({
      configText: FILE,
      env: {
        BEARER_PROXY_API_VERSION: "scripting-preview",
        BEARER_PROXY_TOKEN_REQUEST_FORMAT: "json",
        BEARER_PROXY_CA_FILE: pemCaFile(),
      },
    });
    const u = config.upstreams[0]!;
    expect([u.apiVersion, u.token.format, u.tls.caFile, u.token.tokenUrl]).toEqual([
      "scripting-preview",
      "json",
      pemCaFile(),
      "https://file.example.com/oauth2/token",
    ]);
  });

  it("refuses upstream-level settings when the file has several upstreams, saying which", async () => {
    const text = yaml`
      upstreams:
        - { name: a, baseUrl: "https://a.example.com", clientId: i, clientSecret: s, match: { pathPrefix: /a } }
        - { name: b, baseUrl: "https://b.example.com", clientId: i, clientSecret: s }
    `;
    const issues = await issuesOfText(text, {
      env: { BEARER_PROXY_CLIENT_ID: "x", BEARER_PROXY_LOG_LEVEL: "warn" },
      flags: { caFile: "/etc/hostname" },
    });
    expect(issues).toEqual([
      {
        path: "env BEARER_PROXY_CLIENT_ID",
        message:
          "applies only to a single upstream, but the config file has 2 (a, b); set clientId on the upstream in the file instead",
      },
      {
        path: "flag --ca-file",
        message:
          "applies only to a single upstream, but the config file has 2 (a, b); set caFile on the upstream in the file instead",
      },
    ]);
  });

  it("names the env variable or flag in problems with values they gave", async () => {
    const issues = await issuesOfText(`upstreams:${UPSTREAM}`, {
      env: {
        BEARER_PROXY_LISTEN: "8080x",
        BEARER_PROXY_LOG_LEVEL: "loud",
        BEARER_PROXY_TOKEN_REQUEST_FORMAT: "xml",
      },
      flags: { adminListen: "127.0.0.1:99999", baseUrl: "http://api.example.com" },
    });
    expect(issues).toEqual([
      {
        path: "env BEARER_PROXY_LISTEN",
        message: 'expected host:port such as "0.0.0.0:8080" or "[::1]:8080", found "8080x"',
      },
      {
        path: "flag --admin-listen",
        message:
          'expected host:port such as "0.0.0.0:8080" or "[::1]:8080", found "127.0.0.1:99999"',
      },
      {
        path: "env BEARER_PROXY_LOG_LEVEL",
        message:
          'expected one of "trace", "debug", "info", "warn", "error", "fatal", "silent", found "loud"',
      },
      {
        path: "env BEARER_PROXY_TOKEN_REQUEST_FORMAT",
        message: 'expected one of "form", "json", found "xml"',
      },
      {
        path: "flag --base-url",
        message:
          'expected an https:// URL, found "http://api.example.com"; plain HTTP needs allowInsecureHttp: true in a config file',
      },
    ]);
  });

  it("reports both halves of a pair set at the same level", async () => {
    const issues = await issuesOfText(`upstreams:${UPSTREAM}`, {
      env: { BEARER_PROXY_CLIENT_SECRET: "a", BEARER_PROXY_CLIENT_SECRET_FILE: "/etc/hostname" },
    });
    expect(issues).toEqual([
      {
        path: "env BEARER_PROXY_CLIENT_SECRET_FILE",
        message:
          "set only one of BEARER_PROXY_CLIENT_SECRET and BEARER_PROXY_CLIENT_SECRET_FILE, found both",
      },
    ]);
  });

  it("treats an empty env variable as unset", async () => {
    const { config } = await loadConfigWithWarnings({
      configText: FILE,
      env: { BEARER_PROXY_LISTEN: "", BEARER_PROXY_BASE_URL: "" },
    });
    expect(config.listen.port).toBe(7000);
    expect(config.upstreams[0]?.baseUrl).toBe("https://file.example.com");
  });

  it("warns about unknown BEARER_PROXY_* variables, with a hint", async () => {
    const { warnings } = await loadConfigWithWarnings({
      configText: `upstreams:${UPSTREAM}`,
      env: { BEARER_PROXY_CLIENT_SECRT: "x", BEARER_PROXY_FOO: "y", OTHER_VAR: "z" },
    });
    expect(warnings).toEqual([
      'env BEARER_PROXY_CLIENT_SECRT: unknown variable, ignored (did you mean "BEARER_PROXY_CLIENT_SECRET"?)',
      "env BEARER_PROXY_FOO: unknown variable, ignored",
    ]);
  });

  it("drops file problems in values an override replaced", async () => {
    const text = yaml`
      listen: { port: "\${PROXY_PORT}" }
      upstreams:
        - name: api
          baseUrl: https://api.example.com
          clientId: id
          clientSecret: \${UNSET_SECRET}
    `;
    const { config } = await loadConfigWithWarnings({
      configText: text,
      env: {
        BEARER_PROXY_LISTEN: "127.0.0.1:1234",
        BEARER_PROXY_CLIENT_SECRET_FILE: "/etc/hostname",
      },
    });
    expect(config.listen.port).toBe(1234);
    expect(config.upstreams[0]?.token.clientSecret).toEqual({
      kind: "file",
      path: "/etc/hostname",
    });
  });
});

describe("which config file", () => {
  const fixture = resolve(import.meta.dirname, "../fixtures/config/secret-files.yaml");

  it("reads BEARER_PROXY_CONFIG when no configFile is given", async () => {
    const { config } = await loadConfigWithWarnings({ env: { BEARER_PROXY_CONFIG: fixture } });
    expect(config.upstreams[0]?.name).toBe("files");
  });

  it("prefers configFile over BEARER_PROXY_CONFIG", async () => {
    const issues = await issuesOf({
      configFile: "/nonexistent/proxy.yaml",
      env: { BEARER_PROXY_CONFIG: fixture },
    });
    expect(issues).toEqual([
      { path: "config file", message: "cannot read /nonexistent/proxy.yaml: no such file" },
    ]);
  });

  it("names BEARER_PROXY_CONFIG when the file it names cannot be read", async () => {
    const issues = await issuesOf({
      env: { BEARER_PROXY_CONFIG: "missing.yaml" },
      cwd: "/nonexistent",
    });
    expect(issues).toEqual([
      {
        path: "env BEARER_PROXY_CONFIG",
        message: "cannot read /nonexistent/missing.yaml: no such file",
      },
    ]);
    expect(await issuesOf({ configFile: "/" })).toEqual([
      { path: "config file", message: "cannot read /: it is a directory" },
    ]);
  });
});
