/**
 * The Helm chart's values: values.yaml and every example values file pass values.schema.json
 * (as `helm install` would check them), bad values are rejected, and the bearer-proxy config
 * each one renders passes bearer-proxy's own schema and loader.
 *
 * values.schema.json embeds bearer-proxy's config schema under `definitions.config`. After a
 * change to src/config/schema.ts, regenerate it:
 *   UPDATE_HELM_SCHEMA=1 npx vitest run test/packaging/helm-values.test.ts
 */
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import {
  CHART_DIR,
  chartConfigSchema,
  formatErrors,
  mergeValues,
  readValuesSchema,
  renderChartConfig,
  substituteEnv,
  type Values,
  validateConfigFile,
  validateValues,
  validateWithLoader,
} from "./schema-tools.js";

const SCHEMA_PATH = join(CHART_DIR, "values.schema.json");

function readYaml(path: string): Values {
  return parse(readFileSync(path, "utf8")) as Values;
}

const defaults = readYaml(join(CHART_DIR, "values.yaml"));
const exampleFiles = readdirSync(join(CHART_DIR, "examples")).filter((f) =>
  f.endsWith("-values.yaml"),
);
/** values.yaml alone, then each example merged over it as Helm does. */
const valueSets: [string, Values][] = [
  ["values.yaml", defaults],
  ...exampleFiles.map((f): [string, Values] => [
    `examples/${f}`,
    mergeValues(defaults, readYaml(join(CHART_DIR, "examples", f))),
  ]),
];

/** Defaults with one change, as `--set` or a values file would make it. */
function withOverride(overrides: Values): Values {
  return mergeValues(defaults, overrides);
}

describe("values.schema.json", () => {
  it("embeds bearer-proxy's current config schema under definitions.config", () => {
    const schema = readValuesSchema();
    const expected = chartConfigSchema();
    if (process.env.UPDATE_HELM_SCHEMA === "1") {
      (schema.definitions as Values).config = expected;
      writeFileSync(SCHEMA_PATH, `${JSON.stringify(schema, null, 2)}\n`);
    }
    expect((schema.definitions as Values).config, "run with UPDATE_HELM_SCHEMA=1").toEqual(
      expected,
    );
  });

  it("is draft-07 and strict at the top level", () => {
    const schema = readValuesSchema();
    expect(schema.$schema).toBe("http://json-schema.org/draft-07/schema#");
    expect(schema.additionalProperties).toBe(false);
  });

  it("documents a schema property for every key in values.yaml, and nothing more", () => {
    const properties = Object.keys(readValuesSchema().properties as Values).filter(
      (k) => k !== "global",
    );
    expect(properties.sort()).toEqual(Object.keys(defaults).sort());
  });

  it.each(exampleFiles)("exists for examples/%s", (file) => {
    expect(file).toMatch(/^gateway(-[a-z]+)*-values\.yaml$/);
  });

  it.each(valueSets)("accepts %s", (_name, values) => {
    expect(formatErrors(validateValues(values))).toBe("");
  });

  it("finds the example values files the guides refer to", () => {
    expect(exampleFiles.sort()).toEqual([
      "gateway-callers-values.yaml",
      "gateway-redis-sentinel-values.yaml",
      "gateway-redis-values.yaml",
      "gateway-values.yaml",
    ]);
  });
});

describe("values.schema.json rejects bad values", () => {
  const upstream = {
    name: "api",
    baseUrl: "https://api.example.com",
    clientSecretFile: "/var/run/secrets/bearer-proxy/client-secret",
  };
  const cases: [string, Values, RegExp][] = [
    ["a misspelt top-level key", { replicaCont: 3 }, /must NOT have additional properties/],
    ["an unknown mode", { mode: "daemonset" }, /\/mode must be equal to one of the allowed values/],
    [
      "config without upstreams",
      { config: { upstreams: null } },
      /\/config must have required property 'upstreams'/,
    ],
    [
      "an empty upstream list",
      { config: { upstreams: [] } },
      /\/config\/upstreams must NOT have fewer than 1 items/,
    ],
    [
      "a misspelt upstream key",
      { config: { upstreams: [{ ...upstream, clientSecretFIle: "/x" }] } },
      /\/config\/upstreams\/0 must NOT have additional properties/,
    ],
    [
      "an upstream name with capitals",
      { config: { upstreams: [{ ...upstream, name: "API" }] } },
      /\/config\/upstreams\/0\/name must match pattern/,
    ],
    [
      "a bad duration in config",
      { config: { upstreams: [{ ...upstream, token: { timeout: "10 seconds" } }] } },
      /\/config\/upstreams\/0\/token\/timeout/,
    ],
    [
      "config.listen (the chart owns it)",
      { config: { listen: { port: 8080 }, upstreams: [upstream] } },
      /\/config must NOT have additional properties/,
    ],
    [
      "config.shutdown (use shutdown.*Seconds)",
      { config: { shutdown: { drainDelay: "5s" }, upstreams: [upstream] } },
      /\/config must NOT have additional properties/,
    ],
    [
      "config.tokenCache.redis (use redis.*)",
      { config: { tokenCache: { redis: { url: "redis://r:6379" } }, upstreams: [upstream] } },
      /\/config\/tokenCache must NOT have additional properties/,
    ],
    [
      "redis enabled without a URL, cluster nodes or a Sentinel master",
      { redis: { enabled: true } },
      /\/redis must match a schema in anyOf/,
    ],
    [
      "a Redis URL that is not redis://",
      { redis: { enabled: true, url: "http://redis:6379" } },
      /\/redis\/url must match pattern/,
    ],
    [
      "a bad Redis lockTtl",
      { redis: { lockTtl: "fifteen" } },
      /\/redis\/lockTtl must match pattern/,
    ],
    [
      "shutdown seconds as a duration string",
      { shutdown: { drainDelaySeconds: "5s" } },
      /\/shutdown\/drainDelaySeconds must be integer/,
    ],
    [
      "a port out of range",
      { containerPorts: { proxy: 70000 } },
      /\/containerPorts\/proxy must be <= 65535/,
    ],
    [
      "a probe overriding its endpoint",
      { probes: { readiness: { httpGet: { path: "/" } } } },
      /\/probes\/readiness must NOT have additional properties/,
    ],
    [
      "an unknown pull policy",
      { image: { pullPolicy: "Sometimes" } },
      /\/image\/pullPolicy must be equal to one of the allowed values/,
    ],
    [
      "a digest without sha256:",
      { image: { digest: "abc" } },
      /\/image\/digest must match pattern/,
    ],
    [
      "a CIDR without prefix length",
      { networkPolicy: { egress: { upstreams: [{ cidr: "10.0.0.1" }] } } },
      /\/networkPolicy\/egress\/upstreams\/0\/cidr must match pattern/,
    ],
    [
      "a non-Prometheus scrape interval",
      { metrics: { serviceMonitor: { interval: "30 seconds" } } },
      /\/metrics\/serviceMonitor\/interval must match pattern/,
    ],
    [
      "a Service port name over 15 characters",
      { service: { extraPorts: [{ name: "upstream-listener-1", port: 8081 }] } },
      /\/service\/extraPorts\/0\/name must match pattern/,
    ],
    [
      "an error-rate threshold above 1",
      { metrics: { prometheusRule: { errorRate: { threshold: 5 } } } },
      /\/metrics\/prometheusRule\/errorRate\/threshold must be <= 1/,
    ],
    [
      "a PDB percentage without %",
      { podDisruptionBudget: { maxUnavailable: "50" } },
      /\/podDisruptionBudget\/maxUnavailable/,
    ],
    [
      "extraArgs that are not strings",
      { extraArgs: [{ "--log-level": "debug" }] },
      /\/extraArgs\/0 must be string/,
    ],
  ];

  it.each(cases)("rejects %s", (_name, overrides, message) => {
    const errors = validateValues(withOverride(overrides));
    expect(errors.length).toBeGreaterThan(0);
    expect(formatErrors(errors)).toMatch(message);
  });
});

describe("the config each values set renders", () => {
  it.each(valueSets)("%s renders a config valid per ConfigFile", (_name, values) => {
    const config = substituteEnv(renderChartConfig(values));
    expect(formatErrors(validateConfigFile(config))).toBe("");
  });

  it.each(valueSets)("%s renders a config bearer-proxy's loader accepts", async (_n, values) => {
    const text = JSON.stringify(renderChartConfig(values));
    expect(await validateWithLoader(text)).toEqual([]);
  });

  it("renders shutdown from the same seconds that size the grace period", () => {
    const config = renderChartConfig(withOverride({ shutdown: { drainDelaySeconds: 7 } }));
    expect(config.shutdown).toEqual({ drainDelay: "7s", timeout: "30s" });
  });

  it("wires redis.* into tokenCache.redis and keeps other tokenCache settings", () => {
    const values = mergeValues(
      defaults,
      readYaml(join(CHART_DIR, "examples", "gateway-redis-values.yaml")),
    );
    const tokenCache = renderChartConfig(values).tokenCache as Values;
    expect(tokenCache.maxSources).toBe(1000);
    expect(tokenCache.redis).toMatchObject({
      url: expect.stringMatching(/^redis:\/\//),
      lockTtl: "15s",
    });
  });

  it("the loader check itself fails on a broken config", async () => {
    const problems = await validateWithLoader(
      JSON.stringify({ upstreams: [{ name: "api", baseUrl: "http://api.example.com" }] }),
    );
    expect(problems.join("\n")).toMatch(/baseUrl/);
  });
});
