/** Schema problems: all reported at once, with readable paths and expected/found messages. */
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import { translateErrors } from "../../src/config/schema-errors.js";
import { issuesOf, issuesOfText, UPSTREAM, yaml } from "./load-helpers.js";

const FIXTURES = resolve(import.meta.dirname, "../fixtures/config");

describe("schema errors", () => {
  it("reports all three mistakes of a bad file with their paths and lines", async () => {
    const issues = await issuesOf({ configFile: resolve(FIXTURES, "three-mistakes.yaml") });
    expect(issues).toEqual([
      {
        path: "upstreams[0] (sheets).baseUrl",
        message:
          'expected an https:// URL, found "http://sheets.example.com"; set allowInsecureHttp: true to permit plain HTTP (line 6)',
      },
      {
        path: "upstreams[0] (sheets).token.timeout",
        message:
          'expected a duration such as "500ms", "5s", "2m", "1h" or whole milliseconds, found "5 sec" (line 10)',
      },
      {
        path: "upstreams[1] (drive).stripPrefx",
        message: 'unknown key (did you mean "stripPrefix"?) (line 15)',
      },
    ]);
  });

  it("names the file in the error message, one problem per line", async () => {
    const file = resolve(FIXTURES, "three-mistakes.yaml");
    await expect(loadConfig({ configFile: file, env: {} })).rejects.toThrow(
      `invalid configuration in ${file} (3 problems)\n  upstreams[0] (sheets).baseUrl: expected an https:// URL`,
    );
  });

  it("hints at near-miss keys, and at keys that belong one level down", async () => {
    const issues = await issuesOfText(yaml`
      lissten: { port: 1 }
      upstreams:
        - name: api
          baseUrl: https://api.example.com
          clientId: id
          clientSecret: secret
          prefetch: false
          match: { pathprefix: /x }
    `);
    expect(issues.map((i) => `${i.path}: ${i.message}`)).toEqual([
      'lissten: unknown key (did you mean "listen"?) (line 1)',
      'upstreams[0] (api).prefetch: unknown key (did you mean "token.prefetch"?) (line 7)',
      'upstreams[0] (api).match.pathprefix: unknown key (did you mean "pathPrefix"?) (line 8)',
    ]);
  });

  it("prefers the key a typo is closest to over one it merely starts with (issue 32)", async () => {
    const issues = await issuesOfText(yaml`
      upstreams:
        - name: api
          baseUrl: https://api.example.com
          clientIdFlie: /run/secrets/id
          clientSecretFlie: /run/secrets/secret
    `);
    expect(issues.map((i) => `${i.path}: ${i.message}`)).toEqual(
      expect.arrayContaining([
        'upstreams[0] (api).clientIdFlie: unknown key (did you mean "clientIdFile"?) (line 4)',
        'upstreams[0] (api).clientSecretFlie: unknown key (did you mean "clientSecretFile"?) (line 5)',
      ]),
    );
  });

  it("lists the allowed keys of a small block when nothing is close", async () => {
    const issues = await issuesOfText(`shutdown: { grace: 5s }\nupstreams:${UPSTREAM}`);
    expect(issues).toEqual([
      {
        path: "shutdown.grace",
        message: "unknown key; expected one of drainDelay, timeout (line 1)",
      },
    ]);
  });

  it("collapses union noise into one message per value", async () => {
    const issues = await issuesOfText(yaml`
      log: { level: warning, format: text }
      limits: { maxHeaderSize: 16 kB, maxHeaderCount: 0 }
      upstreams:
        - name: api
          baseUrl: https://api.example.com
          clientId: id
          clientSecret: secret
          clientAuth: header
          token: { refreshWindow: [0.8], prefetch: "yes" }
    `);
    expect(issues.map((i) => `${i.path}: ${i.message}`)).toEqual([
      'log.level: expected one of "trace", "debug", "info", "warn", "error", "fatal", "silent", found "warning" (did you mean "warn"?) (line 1)',
      'log.format: expected one of "json", "pretty", found "text" (line 1)',
      'limits.maxHeaderSize: expected a size such as "64KiB", "1MiB" or whole bytes, found "16 kB" (line 2)',
      "limits.maxHeaderCount: expected at least 1, found 0 (line 2)",
      'upstreams[0] (api).clientAuth: expected one of "body", "basic", "private-key-jwt", "client-assertion-file", "tls-client-auth", found "header" (line 8)',
      "upstreams[0] (api).token.refreshWindow: expected a list of exactly 2 items (such as [0.75, 0.85]), found 1 item (line 9)",
      'upstreams[0] (api).token.prefetch: expected true or false, found "yes" (line 9)',
    ]);
  });

  it("reports missing required keys and wrong shapes", async () => {
    const issues = await issuesOfText(yaml`
      listen: 8080
      upstreams:
        - name: api
          clientId: id
          clientSecret: secret
        - just-a-string
    `);
    expect(issues.map((i) => `${i.path}: ${i.message}`)).toEqual([
      "listen: expected a mapping, found 8080 (line 1)",
      "upstreams[0] (api).baseUrl: required, but missing (line 3)",
      'upstreams[1]: expected a mapping, found "just-a-string" (line 6)',
    ]);
  });

  it("reports an empty upstream list and a root that is not a mapping", async () => {
    expect(await issuesOfText("upstreams: []\n")).toEqual([
      { path: "upstreams", message: "expected at least 1 item, found none (line 1)" },
    ]);
    expect(await issuesOfText("- a\n- b\n")).toEqual([
      { path: "(root)", message: "expected a mapping, found a list (line 1)" },
    ]);
    expect(await issuesOfText("")).toEqual([
      { path: "upstreams", message: "required, but missing" },
    ]);
  });

  it("never shows a secret value, even in a type error", async () => {
    const issues = await issuesOfText(yaml`
      upstreams:
        - name: api
          baseUrl: https://api.example.com
          clientId: ""
          clientSecret: [s3cr3t-value]
          headers: { X-Api-Key: "key\tline\u0001" }
          tokenParams: { client_assertion: 12345 }
    `);
    const text = JSON.stringify(issues);
    expect(text).not.toContain("s3cr3t");
    expect(text).not.toContain("12345");
    expect(issues.map((i) => `${i.path}: ${i.message}`)).toEqual([
      "upstreams[0] (api).clientId: expected a non-empty string, found an empty string (line 4)",
      "upstreams[0] (api).clientSecret: expected a string, found a list (line 5)",
      'upstreams[0] (api).headers["X-Api-Key"]: expected printable ASCII text without line breaks, found a hidden value (line 6)',
      "upstreams[0] (api).tokenParams.client_assertion: expected a string, found a hidden number (line 7)",
      "upstreams[0] (api).tokenParams.client_assertion: cannot be set here: use clientAuth: private-key-jwt or client-assertion-file (line 7)",
    ]);
  });

  it("masks credentials and queries of URLs it quotes", async () => {
    const issues = await issuesOfText(yaml`
      egressProxy: socks5://user:hunter2@proxy:1080
      upstreams:
        - name: api
          baseUrl: ftp://user:pw@api.example.com/x?api_key=topsecret
          clientId: id
          clientSecret: secret
    `);
    const text = JSON.stringify(issues);
    expect(text).not.toContain("hunter2");
    expect(text).not.toContain("topsecret");
    expect(issues[0]).toEqual({
      path: "egressProxy",
      message: 'expected an http:// or https:// URL, found "socks5://***@proxy:1080" (line 1)',
    });
    expect(issues[1]).toEqual({
      path: "upstreams[0] (api).baseUrl",
      message: 'expected an https:// URL, found "ftp://***@api.example.com/x?…" (line 4)',
    });
  });

  it("translates ajv errors without leaking ajv jargon", () => {
    const out = translateErrors([
      {
        keyword: "uniqueItems",
        instancePath: "/upstreams/0/match/hosts",
        schemaPath: "#/x/uniqueItems",
        params: { i: 2, j: 0 },
        data: ["a", "b", "a"],
        parentSchema: {},
      },
    ]);
    expect(out).toEqual([
      {
        path: ["upstreams", 0, "match", "hosts"],
        message: 'expected no duplicates, found "a" at positions 0 and 2',
      },
    ]);
  });
});
