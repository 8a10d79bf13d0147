// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these strings are ${VAR} config values, not templates
/** `${VAR}`, `${VAR:-default}` and `$${` in config values, and coercion of whole references. */
import { describe, expect, it } from "vitest";
import { interpolateString } from "../../src/config/interpolate.js";
import { loadConfig, loadConfigWithWarnings } from "../../src/config/load.js";
import { issuesOfText, yaml } from "./load-helpers.js";

describe("interpolateString", () => {
  const env = { HOST: "api.example.com", EMPTY: "", PORT: "8443" };

  it("substitutes variables and defaults", () => {
    expect(interpolateString("https://${HOST}:${PORT}/x", env).value).toBe(
      "https://api.example.com:8443/x",
    );
    expect(interpolateString("${MISSING:-fallback}", env).value).toBe("fallback");
    expect(interpolateString("${HOST:-fallback}", env).value).toBe("api.example.com");
    expect(interpolateString("${MISSING:-}", env).value).toBe("");
    expect(interpolateString("${MISSING:-a b:c/d}", env).value).toBe("a b:c/d");
  });

  it("uses the default for an empty variable, but an empty value without one", () => {
    expect(interpolateString("${EMPTY:-d}", env).value).toBe("d");
    expect(interpolateString("<${EMPTY}>", env)).toMatchObject({ value: "<>", missing: [] });
  });

  it("reads $${ as a literal ${ and leaves other dollars alone", () => {
    expect(interpolateString("$${HOST}", env).value).toBe("${HOST}");
    expect(interpolateString("cost: $5, $$ and $HOST", env).value).toBe("cost: $5, $$ and $HOST");
    expect(interpolateString("$${HOST} is ${HOST}", env).value).toBe("${HOST} is api.example.com");
  });

  it("reports unset variables and malformed references", () => {
    expect(interpolateString("${A}-${B:-b}-${C}", {})).toMatchObject({
      missing: ["A", "C"],
      vars: ["A", "B", "C"],
    });
    expect(interpolateString("${1X}", {}).errors).toEqual([
      'expected ${NAME} or ${NAME:-default}, found "${1X}" (write "$${" for a literal "${")',
    ]);
    expect(interpolateString("abc ${HOST", env).errors).toEqual([
      'unclosed "${" at character 5 (write "$${" for a literal "${")',
    ]);
  });

  it("marks a value that is exactly one reference as whole", () => {
    expect(interpolateString("${PORT:-1}", env).whole).toBe(true);
    expect(interpolateString("${PORT}x", env).whole).toBe(false);
    expect(interpolateString("$${PORT}", env).whole).toBe(false);
  });
});

describe("interpolation while loading", () => {
  it("interpolates string values, never keys, and cannot inject YAML structure", async () => {
    const text = yaml`
      upstreams:
        - name: \${NAME:-api}
          baseUrl: https://\${HOST:-api.example.com}
          clientId: \${ID}
          clientSecret: s
    `;
    const config = await loadConfig({
      configText: text,
      env: { ID: "a\nclientSecret: evil\n- x: y" },
    });
    const u = config.upstreams[0]!;
    expect(u.name).toBe("api");
    expect(u.baseUrl).toBe("https://api.example.com");
    expect(u.token.clientId).toEqual({ kind: "inline", value: "a\nclientSecret: evil\n- x: y" });
    expect(u.token.clientSecret).toEqual({ kind: "inline", value: "s" });
  });

  it("leaves keys alone", async () => {
    const text = yaml`
      upstreams:
        - { name: api, baseUrl: "https://api.example.com", clientId: id, clientSecret: s, headers: { "\${KEY}": v } }
    `;
    expect(await issuesOfText(text, { env: { KEY: "x-key" } })).toEqual([
      {
        path: 'upstreams[0] (api).headers["${KEY}"]',
        message:
          'expected a header name (letters, digits and !#$%&\'*+-.^_`|~), found "${KEY}" (line 2)',
      },
    ]);
  });

  it("reports an unset variable with its path, and not also what it caused", async () => {
    const text = yaml`
      upstreams:
        - name: api
          baseUrl: \${API_URL}
          clientId: id
          clientSecret: \${SECRET}
    `;
    expect(await issuesOfText(text)).toEqual([
      {
        path: "upstreams[0] (api).baseUrl",
        message:
          "environment variable API_URL is not set (write ${API_URL:-default} to give a default) (line 3)",
      },
      {
        path: "upstreams[0] (api).clientSecret",
        message:
          "environment variable SECRET is not set (write ${SECRET:-default} to give a default) (line 5)",
      },
    ]);
  });

  it("coerces a whole reference to the integer or boolean the schema wants", async () => {
    const text = yaml`
      listen: { port: "\${PORT:-8080}" }
      limits: { maxConnections: "\${MAX_CONN}", headersTimeout: "\${HT:-2500}", keepAliveTimeout: "\${KA:-3s}" }
      upstreams:
        - name: api
          baseUrl: https://api.example.com
          clientId: id
          clientSecret: s
          forwardedHeaders: \${FWD:-false}
          stripPrefix: \${STRIP}
          token: { prefetch: "\${PREFETCH:-true}", refreshWindow: ["\${LO:-0.5}", "\${HI}"] }
    `;
    const config = await loadConfig({
      configText: text,
      env: { PORT: "9000", MAX_CONN: "50", STRIP: "TRUE", HI: "0.6" },
    });
    expect(config.listen.port).toBe(9000);
    expect(config.limits.maxConnections).toBe(50);
    expect(config.limits.headersTimeoutMs).toBe(2500);
    expect(config.limits.keepAliveTimeoutMs).toBe(3000);
    const u = config.upstreams[0]!;
    expect([u.forwardedHeaders, u.stripPrefix, u.tokenPolicy.prefetch]).toEqual([
      false,
      true,
      true,
    ]);
    expect(u.tokenPolicy.refreshWindow).toEqual([0.5, 0.6]);
  });

  it("does not coerce literal strings or partial references", async () => {
    const text = yaml`
      listen: { port: "8080" }
      admin: { port: "9\${N:-9}01" }
      upstreams:
        - { name: api, baseUrl: "https://api.example.com", clientId: id, clientSecret: s }
    `;
    expect(await issuesOfText(text)).toEqual([
      { path: "listen.port", message: 'expected a whole number, found "8080" (line 1)' },
      { path: "admin.port", message: 'expected a whole number, found "9901" (from ${N}, line 2)' },
    ]);
  });

  it("names the variable a bad value came from", async () => {
    const text = yaml`
      upstreams:
        - name: api
          baseUrl: https://api.example.com
          clientId: id
          clientSecret: s
          connections: \${CONNS}
    `;
    expect(await issuesOfText(text, { env: { CONNS: "lots" } })).toEqual([
      {
        path: "upstreams[0] (api).connections",
        message: 'expected a whole number, found "lots" (from ${CONNS}, line 6)',
      },
    ]);
  });

  it("keeps $${ escapes literal in the loaded config", async () => {
    const { config } = await loadConfigWithWarnings({
      configText: yaml`
        upstreams:
          - name: api
            baseUrl: https://api.example.com
            clientId: id
            clientSecret: "pa$$\${word}"
      `,
      env: { word: "nope" },
    });
    expect(config.upstreams[0]?.token.clientSecret).toEqual({
      kind: "inline",
      value: "pa$${word}",
    });
  });

  it("does not echo a malformed reference written in a secret value", async () => {
    const issues = await issuesOfText(yaml`
      upstreams:
        - name: api
          baseUrl: https://api.example.com
          clientId: id
          clientSecret: "x\${hunter2 secret}y"
    `);
    expect(issues).toEqual([
      {
        path: "upstreams[0] (api).clientSecret",
        message:
          'expected ${NAME} or ${NAME:-default}, found a malformed "${…}" (write "$${" for a literal "${") (line 5)',
      },
    ]);
    expect(JSON.stringify(issues)).not.toContain("hunter2");
  });
});
