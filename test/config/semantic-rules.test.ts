/** Each rule the schema cannot express, with its exact message. */
import { generateKeyPairSync } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { rootCertificates } from "node:tls";
import { afterAll, describe, expect, it } from "vitest";
import { loadConfigWithWarnings } from "../../src/config/load.js";
import { issuesOfText, removeTempDirs, tempDir, yaml } from "./load-helpers.js";

/** One upstream named "api" with `extra` YAML lines added (indented 4 spaces). */
function oneUpstream(extra: string, base = "baseUrl: https://api.example.com"): string {
  const lines = [
    base,
    "clientId: id",
    "clientSecret: secret",
    ...extra.split("\n").filter(Boolean),
  ];
  return `upstreams:\n  - name: api\n${lines.map((l) => `    ${l}`).join("\n")}\n`;
}

const messages = async (text: string) =>
  (await issuesOfText(text)).map((i) => `${i.path}: ${i.message}`);

afterAll(removeTempDirs);

describe("URLs", () => {
  it("requires https:// for baseUrl and tokenUrl", async () => {
    expect(
      await messages(
        oneUpstream("tokenUrl: http://login.example.com/token", "baseUrl: http://api.example.com"),
      ),
    ).toEqual([
      'upstreams[0] (api).baseUrl: expected an https:// URL, found "http://api.example.com"; set allowInsecureHttp: true to permit plain HTTP (line 3)',
      'upstreams[0] (api).tokenUrl: expected an https:// URL, found "http://login.example.com/token"; set allowInsecureHttp: true to permit plain HTTP (line 6)',
    ]);
  });

  it("permits http:// with allowInsecureHttp, with a warning per URL", async () => {
    const { config, warnings } = await loadConfigWithWarnings({
      configText: oneUpstream("allowInsecureHttp: true", "baseUrl: http://127.0.0.1:9000"),
      env: {},
    });
    expect(config.upstreams[0]?.token.tokenUrl).toBe("http://127.0.0.1:9000/iam/v1/oauth2/token");
    expect(warnings).toEqual([
      "upstreams[0] (api).baseUrl: plain http:// permitted by allowInsecureHttp: the client secret and tokens travel unencrypted to 127.0.0.1:9000 (line 3)",
    ]);
  });

  it("rejects other schemes even with allowInsecureHttp", async () => {
    expect(
      await messages(oneUpstream("allowInsecureHttp: true", "baseUrl: ws://api.example.com")),
    ).toEqual([
      'upstreams[0] (api).baseUrl: expected an https:// or http:// URL, found "ws://api.example.com" (line 3)',
    ]);
  });

  it("requires baseUrl to parse as an absolute URL", async () => {
    expect(await messages(oneUpstream("", "baseUrl: api.example.com/v1"))).toEqual([
      'upstreams[0] (api).baseUrl: expected an absolute URL such as "https://api.example.com", found "api.example.com/v1" (line 3)',
    ]);
  });

  it("rejects a query, a fragment or user:password@ in baseUrl without echoing them", async () => {
    const issues = await messages(
      oneUpstream("", "baseUrl: https://me:pa55@api.example.com/?key=k3y#top"),
    );
    expect(issues).toEqual([
      "upstreams[0] (api).baseUrl: expected a URL without user:password@ (credentials belong in clientId/clientSecret), found credentials in it (line 3)",
      "upstreams[0] (api).baseUrl: expected a URL without a query (?…), found one (line 3)",
      "upstreams[0] (api).baseUrl: expected a URL without a fragment (#…), found one (line 3)",
    ]);
    expect(issues.join()).not.toMatch(/pa55|k3y/);
  });

  it("allows a query in tokenUrl (RFC 6749 §3.2) but not a fragment", async () => {
    expect(
      await messages(oneUpstream("tokenUrl: https://login.example.com/token?tenant=a#x")),
    ).toEqual([
      "upstreams[0] (api).tokenUrl: expected a URL without a fragment (#…), found one (line 6)",
    ]);
  });
});

describe("credentials", () => {
  it("needs exactly one of clientId and clientIdFile, and of clientSecret and clientSecretFile", async () => {
    const text = yaml`
      upstreams:
        - name: both
          baseUrl: https://a.example.com
          clientId: id
          clientIdFile: /etc/hostname
          clientSecret: s
        - name: neither
          baseUrl: https://b.example.com
          clientId: id
          match: { pathPrefix: /b }
    `;
    expect(await messages(text)).toEqual([
      "upstreams[0] (both): expected exactly one of clientId and clientIdFile, found both (line 2)",
      "upstreams[1] (neither): expected exactly one of clientSecret and clientSecretFile, found neither (line 7)",
    ]);
  });

  it("requires named files to exist and be regular files", async () => {
    const dir = tempDir();
    const text = oneUpstream(
      [
        "clientSecretFile: missing-secret",
        "tls:",
        "  caFile: .",
        "  certFile: /no/such/cert.pem",
        "  keyFile: /no/such/key.pem",
      ].join("\n"),
    ).replace("    clientSecret: secret\n", "");
    const issues = await issuesOfText(text, { configFile: join(dir, "proxy.yaml") });
    expect(issues.map((i) => `${i.path}: ${i.message}`)).toEqual([
      `upstreams[0] (api).clientSecretFile: expected a readable file, found nothing at ${join(dir, "missing-secret")} (line 5)`,
      `upstreams[0] (api).tls.caFile: expected a readable file, found a directory at ${dir} (line 7)`,
      "upstreams[0] (api).tls.certFile: expected a readable file, found nothing at /no/such/cert.pem (line 8)",
      "upstreams[0] (api).tls.keyFile: expected a readable file, found nothing at /no/such/key.pem (line 9)",
    ]);
  });

  it("needs tls.keyFile with tls.certFile and the other way round", async () => {
    const dir = tempDir();
    // Real PEM contents: what the files hold is checked too (tls-files.test.ts).
    writeFileSync(join(dir, "cert.pem"), rootCertificates[0]!);
    const { privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
    writeFileSync(join(dir, "key.pem"), privateKey.export({ type: "pkcs8", format: "pem" }));
    const configFile = join(dir, "proxy.yaml");
    expect(
      (await issuesOfText(oneUpstream("tls: { certFile: cert.pem }"), { configFile })).map(
        (i) => `${i.path}: ${i.message}`,
      ),
    ).toEqual([
      "upstreams[0] (api).tls.keyFile: required because tls.certFile is set (a client certificate needs its private key) (line 6)",
    ]);
    expect(
      (await issuesOfText(oneUpstream("tls: { keyFile: key.pem }"), { configFile })).map(
        (i) => `${i.path}: ${i.message}`,
      ),
    ).toEqual([
      "upstreams[0] (api).tls.certFile: required because tls.keyFile is set (a private key needs its client certificate) (line 6)",
    ]);
  });
});

describe("API versions and token settings", () => {
  it("requires tokenPath (or tokenUrl) for an unknown apiVersion", async () => {
    expect(await messages(oneUpstream("apiVersion: 2027-01-01"))).toEqual([
      'upstreams[0] (api).apiVersion: expected a known version (default, scripting-preview, 2026-09-01.scripting.preview) or tokenPath/tokenUrl to go with another, found "2027-01-01" without either (line 6)',
    ]);
    expect(await messages(oneUpstream("apiVersion: Scripting-Preview"))).toEqual([
      'upstreams[0] (api).apiVersion: expected a known version (default, scripting-preview, 2026-09-01.scripting.preview) or tokenPath/tokenUrl to go with another, found "Scripting-Preview" without either (did you mean "scripting-preview"?) (line 6)',
    ]);
  });

  it("warns that tokenPath is ignored next to tokenUrl", async () => {
    const { warnings } = await loadConfigWithWarnings({
      configText: oneUpstream(
        "apiVersion: beta\ntokenPath: /t\ntokenUrl: https://login.example.com/t",
      ),
      env: {},
    });
    expect(warnings).toEqual([
      "upstreams[0] (api).tokenPath: ignored because tokenUrl is set (line 7)",
    ]);
  });

  it("requires refreshWindow min ≤ max", async () => {
    expect(await messages(oneUpstream("token: { refreshWindow: [0.9, 0.5] }"))).toEqual([
      "upstreams[0] (api).token.refreshWindow: expected [min, max] with min ≤ max, found [0.9, 0.5] (line 6)",
    ]);
  });

  it("rejects token parameters the proxy sends itself", async () => {
    expect(
      await messages(
        oneUpstream("tokenParams: { grant_type: password, scope: x, audience: ok, 'a b': x }"),
      ),
    ).toEqual([
      "upstreams[0] (api).tokenParams.grant_type: cannot be set here: the proxy always sends grant_type=client_credentials (line 6)",
      "upstreams[0] (api).tokenParams.scope: cannot be set here: use the scope setting (line 6)",
      'upstreams[0] (api).tokenParams["a b"]: expected a parameter name of letters, digits, "_", "." and "-", found "a b" (line 6)',
    ]);
  });
});

describe("headers", () => {
  it.each([
    ["Authorization", "the proxy sets authorization itself"],
    ["X-Version", "the proxy sets x-version from apiVersion"],
    ["Host", "the proxy sets host from baseUrl"],
    ["Content-Length", "each request's body sets its own content-length"],
    ["Connection", "it is a hop-by-hop header (RFC 9110 §7.6.1), never forwarded"],
    ["Keep-Alive", "it is a hop-by-hop header (RFC 9110 §7.6.1), never forwarded"],
    ["Proxy-Connection", "it is a hop-by-hop header (RFC 9110 §7.6.1), never forwarded"],
    ["TE", "it is a hop-by-hop header (RFC 9110 §7.6.1), never forwarded"],
    ["Transfer-Encoding", "it is a hop-by-hop header (RFC 9110 §7.6.1), never forwarded"],
    ["Upgrade", "it is a hop-by-hop header (RFC 9110 §7.6.1), never forwarded"],
    ["Proxy-Authorization", "it is a hop-by-hop header (RFC 9110 §7.6.1), never forwarded"],
  ])("rejects %s in headers", async (name, reason) => {
    expect(await messages(oneUpstream(`headers: { ${name}: v }`))).toEqual([
      `upstreams[0] (api).headers${name.includes("-") ? `["${name}"]` : `.${name}`}: cannot be set here: ${reason} (line 6)`,
    ]);
  });

  it("rejects header names that differ only in case, and invalid names", async () => {
    expect(await messages(oneUpstream("headers: { X-Team: a, x-team: b, 'x team': c }"))).toEqual([
      'upstreams[0] (api).headers["x-team"]: duplicate of "X-Team" (header names are case-insensitive) (line 6)',
      'upstreams[0] (api).headers["x team"]: expected a header name (letters, digits and !#$%&\'*+-.^_`|~), found "x team" (line 6)',
    ]);
  });

  it("rejects token request headers the proxy sets, authorization only with clientAuth: basic", async () => {
    expect(
      await messages(oneUpstream("tokenHeaders: { Content-Type: text/plain, Authorization: x }")),
    ).toEqual([
      'upstreams[0] (api).tokenHeaders["Content-Type"]: cannot be set here: the proxy sets content-type from tokenRequestFormat (line 6)',
    ]);
    expect(
      await messages(oneUpstream("clientAuth: basic\ntokenHeaders: { Authorization: x }")),
    ).toEqual([
      "upstreams[0] (api).tokenHeaders.Authorization: cannot be set here: the proxy sets authorization for clientAuth: basic (line 7)",
    ]);
  });
});

describe("names and listeners", () => {
  it("requires unique upstream names", async () => {
    const text = yaml`
      upstreams:
        - { name: api, baseUrl: "https://a.example.com", clientId: i, clientSecret: s, match: { pathPrefix: /a } }
        - { name: api, baseUrl: "https://b.example.com", clientId: i, clientSecret: s, match: { pathPrefix: /b } }
    `;
    expect(await messages(text)).toEqual([
      'upstreams[1] (api).name: expected a unique name, found "api" again (first used by upstreams[0] (api)) (line 3)',
    ]);
  });

  it("keeps the admin address apart from the proxy listener", async () => {
    expect(
      await messages(
        `listen: { host: 0.0.0.0, port: 9000 }\nadmin: { port: 9000 }\n${oneUpstream("")}`,
      ),
    ).toEqual([
      "admin: expected an address apart from listen (0.0.0.0:9000), found 127.0.0.1:9000 (line 2)",
    ]);
  });

  it("keeps an upstream's listener apart from listen and admin", async () => {
    const text = yaml`
      upstreams:
        - { name: a, baseUrl: "https://a.example.com", clientId: i, clientSecret: s, listen: { host: 0.0.0.0, port: 8080 } }
        - { name: b, baseUrl: "https://b.example.com", clientId: i, clientSecret: s, listen: { port: 9901 } }
        - { name: c, baseUrl: "https://c.example.com", clientId: i, clientSecret: s, listen: { host: localhost } }
    `;
    expect(await messages(text)).toEqual([
      "upstreams[0] (a).listen: expected an address apart from listen (127.0.0.1:8080), found 0.0.0.0:8080 (line 2)",
      "upstreams[1] (b).listen: expected an address apart from admin (127.0.0.1:9901), found 127.0.0.1:9901 (line 3)",
      "upstreams[2] (c).listen.port: required for an upstream's own listener, found none (line 4)",
    ]);
  });

  it("lets upstreams share an identical listener but not an overlapping one", async () => {
    const text = yaml`
      upstreams:
        - { name: a, baseUrl: "https://a.example.com", clientId: i, clientSecret: s, listen: { port: 8081 }, match: { pathPrefix: /a } }
        - { name: b, baseUrl: "https://b.example.com", clientId: i, clientSecret: s, listen: { port: 8081 }, match: { pathPrefix: /b } }
        - { name: c, baseUrl: "https://c.example.com", clientId: i, clientSecret: s, listen: { host: "::", port: 8081 } }
    `;
    expect(await messages(text)).toEqual([
      "upstreams[2] (c).listen: expected either the same address as upstreams[0] (a).listen (127.0.0.1:8081) to share its listener, or another port, found [::]:8081 (line 4)",
    ]);
  });

  it("never reports port 0 (a free port) as a collision", async () => {
    const text = `listen: { port: 0 }\nadmin: { port: 0 }\n${oneUpstream("listen: { port: 0 }")}`;
    await expect(loadConfigWithWarnings({ configText: text, env: {} })).resolves.toBeDefined();
  });
});

describe("ambiguous routes", () => {
  const upstream = (name: string, match: string, listen = "") =>
    `  - { name: ${name}, baseUrl: "https://${name}.example.com", clientId: i, clientSecret: s, match: ${match}${listen} }\n`;

  it("rejects two upstreams with the same prefix and no hosts, naming both", async () => {
    const text = `upstreams:\n${upstream("sheets", "{}")}${upstream("drive", "{ pathPrefix: / }")}`;
    expect(await messages(text)).toEqual([
      'upstreams[1] (drive).match: routes the same requests as upstreams[0] (sheets) on listen 127.0.0.1:8080 (pathPrefix "/", any host); give one of them another match.pathPrefix or match.hosts (line 3)',
    ]);
  });

  it("compares hosts case-insensitively with port 80 as the default", async () => {
    const text = `upstreams:\n${upstream("sheets", "{ hosts: [Docs.Local, other] }")}${upstream("drive", '{ hosts: ["docs.local:80"] }')}`;
    expect(await messages(text)).toEqual([
      'upstreams[1] (drive).match: routes the same requests as upstreams[0] (sheets) on listen 127.0.0.1:8080 (pathPrefix "/", host "docs.local:80"); give one of them another match.pathPrefix or match.hosts (line 3)',
    ]);
  });

  it("accepts routes told apart by prefix, by hosts, or by listener", async () => {
    const text = [
      "upstreams:\n",
      upstream("a", "{}"),
      upstream("b", "{ pathPrefix: /b }"),
      upstream("c", "{ hosts: [c.local] }"),
      upstream("d", '{ hosts: ["c.local:8080"] }'),
      upstream("e", "{}", ", listen: { port: 8081 }"),
    ].join("");
    const { config } = await loadConfigWithWarnings({ configText: text, env: {} });
    expect(config.upstreams).toHaveLength(5);
  });

  it("checks routes per listener", async () => {
    const listen = ", listen: { port: 8081 }";
    const text = `upstreams:\n${upstream("a", "{}", listen)}${upstream("b", "{}", listen)}`;
    expect(await messages(text)).toEqual([
      'upstreams[1] (b).match: routes the same requests as upstreams[0] (a) on listener 127.0.0.1:8081 (pathPrefix "/", any host); give one of them another match.pathPrefix or match.hosts (line 3)',
    ]);
  });
});

describe("path prefixes (issue 30: requests are routed by their normalized path)", () => {
  it("refuses a prefix no normalized path can match, naming the form to write", async () => {
    const text = [
      "upstreams:",
      '  - { name: a, baseUrl: "https://a.example.com", clientId: i, clientSecret: s, match: { pathPrefix: "/%61dmin/" } }',
      '  - { name: b, baseUrl: "https://b.example.com", clientId: i, clientSecret: s, match: { pathPrefix: "/api//v1" } }',
      '  - { name: c, baseUrl: "https://c.example.com", clientId: i, clientSecret: s, match: { pathPrefix: "/a%2Fb" } }',
      '  - { name: d, baseUrl: "https://d.example.com", clientId: i, clientSecret: s, match: { pathPrefix: "/100%" } }',
      '  - { name: e, baseUrl: "https://e.example.com", clientId: i, clientSecret: s, match: { pathPrefix: "/x%3b" } }',
      "",
    ].join("\n");
    expect(await messages(text)).toEqual([
      'upstreams[0] (a).match.pathPrefix: expected the path as requests are routed, "/admin/" (request paths are normalized first: see paths), found "/%61dmin/" (line 2)',
      'upstreams[1] (b).match.pathPrefix: expected the path as requests are routed, "/api/v1" (request paths are normalized first: see paths), found "/api//v1" (line 3)',
      'upstreams[2] (c).match.pathPrefix: expected no encoded slash (%2F) while paths.escapedSlashes is reject (such requests are refused before routing), found "/a%2Fb" (line 4)',
      'upstreams[3] (d).match.pathPrefix: expected every % followed by two hex digits, found "/100%" (line 5)',
      'upstreams[4] (e).match.pathPrefix: expected the path as requests are routed, "/x%3B" (request paths are normalized first: see paths), found "/x%3b" (line 6)',
    ]);
  });

  it("reads the prefix by the configured paths rules", async () => {
    const upstream = (prefix: string) =>
      `upstreams:\n  - { name: a, baseUrl: "https://a.example.com", clientId: i, clientSecret: s, match: { pathPrefix: "${prefix}" } }\n`;
    const keep = "paths: { escapedSlashes: keep, mergeSlashes: false }\n";
    const { config } = await loadConfigWithWarnings({
      configText: `${keep}${upstream("/api//a%2Fb/")}`,
      env: {},
    });
    expect(config.upstreams[0]?.match.pathPrefix).toBe("/api//a%2Fb/");
    expect(config.paths).toEqual({ mergeSlashes: false, escapedSlashes: "keep" });
    expect(await messages(`paths: { escapedSlashes: unescape }\n${upstream("/a%2Fb/")}`)).toEqual([
      'upstreams[0] (a).match.pathPrefix: expected the path as requests are routed, "/a/b/" (request paths are normalized first: see paths), found "/a%2Fb/" (line 3)',
    ]);
  });
});

describe("timeouts.idleConnection", () => {
  it("must be above zero (undici has no 'never keep idle'; a small value is that)", async () => {
    expect(await messages(oneUpstream("timeouts:\n  idleConnection: 0s"))).toEqual([
      'upstreams[0] (api).timeouts.idleConnection: expected a duration above zero such as "1s", found "0s" (line 7)',
    ]);
    const { config } = await loadConfigWithWarnings({
      configText: oneUpstream("timeouts:\n  idleConnection: 1500ms"),
      env: {},
    });
    expect(config.upstreams[0]?.timeouts.idleConnectionMs).toBe(1500);
  });
});

describe("maxResponseHeaderSize (issue 15)", () => {
  it("defaults to 64 KiB, takes a size, and refuses one too small for any response head", async () => {
    expect(await messages(oneUpstream("maxResponseHeaderSize: 100B"))).toEqual([
      'upstreams[0] (api).maxResponseHeaderSize: expected at least "1KiB" (the default is "64KiB"), found "100B" (line 6)',
    ]);
    const { config } = await loadConfigWithWarnings({
      configText: oneUpstream("maxResponseHeaderSize: 256KiB"),
      env: {},
    });
    expect(config.upstreams[0]?.maxResponseHeaderSizeBytes).toBe(256 * 1024);
    const defaults = await loadConfigWithWarnings({ configText: oneUpstream(""), env: {} });
    expect(defaults.config.upstreams[0]?.maxResponseHeaderSizeBytes).toBe(64 * 1024);
  });
});

describe("rateLimit pauses (issue 30 item 4)", () => {
  it("takes pauseScope, maxPause and wait without a limit of its own", async () => {
    const { config } = await loadConfigWithWarnings({
      configText: oneUpstream("rateLimit: { pauseScope: credential, maxPause: 2m, wait: 30s }"),
      env: {},
    });
    const api = config.upstreams[0]!;
    expect(api.rateLimit).toBeUndefined();
    expect(api.pause).toEqual({ scope: "credential", maxPauseMs: 120_000, waitMs: 30_000 });
  });

  it("refuses a limit's settings without requests", async () => {
    expect(await messages(oneUpstream("rateLimit: { per: 1s, by: caller }"))).toEqual([
      "upstreams[0] (api).rateLimit.per: expected rateLimit.requests beside per: without requests there is no limit to shape (only pauseScope, maxPause and wait apply) (line 6)",
      "upstreams[0] (api).rateLimit.by: expected rateLimit.requests beside by: without requests there is no limit to shape (only pauseScope, maxPause and wait apply) (line 6)",
    ]);
  });

  it("refuses a maxPause that is not whole seconds, which a Retry-After could not honour", async () => {
    expect(await messages(oneUpstream("rateLimit: { requests: 5, maxPause: 1500ms }"))).toEqual([
      'upstreams[0] (api).rateLimit.maxPause: expected whole seconds such as "60s" (or "0s": never pause), found "1500ms": Retry-After counts in seconds, and a refusal\'s Retry-After must not exceed maxPause (line 6)',
    ]);
  });

  it("refuses an unknown pauseScope and a maxWaiting below 1", async () => {
    const found = await messages(
      `limits: { maxWaiting: 0 }\n${oneUpstream("rateLimit: { pauseScope: origin }")}`,
    );
    expect(found).toHaveLength(2);
    expect(found[0]).toContain("limits.maxWaiting");
    expect(found[1]).toContain("upstreams[0] (api).rateLimit.pauseScope");
  });
});
