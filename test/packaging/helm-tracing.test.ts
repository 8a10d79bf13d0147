import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { parseKeyValueList } from "../../src/observability/tracing-settings.js";
import { chartDefaults, helm, type K8sObject, renderChart, runHelm } from "./helm-cli.js";
import {
  CHART_DIR,
  formatErrors,
  mergeValues,
  type Values,
  validateValues,
} from "./schema-tools.js";

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: Values;
}

function render(sets: string[]): K8sObject[] {
  return renderChart([], ["existingSecret=creds", ...sets]);
}

function containerEnv(objects: K8sObject[]): EnvVar[] | undefined {
  const deployment = objects.find((o) => o.kind === "Deployment") as unknown as {
    spec: { template: { spec: { containers: { env?: EnvVar[] }[] } } };
  };
  return deployment.spec.template.spec.containers[0]!.env;
}

/** name → value (or valueFrom) of an env list, in order. */
const byName = (env: EnvVar[] = []) =>
  Object.fromEntries(env.map((e) => [e.name, e.value ?? e.valueFrom]));

/** `$(VAR)` as the kubelet expands it from the entries before. */
function expand(value: string, earlier: Record<string, string>): string {
  return value.replace(
    /\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g,
    (whole, name: string) => earlier[name] ?? whole,
  );
}

const ENABLED = [
  "tracing.enabled=true",
  "tracing.endpoint=http://otel-collector.observability:4318",
];

const defaults = chartDefaults;

describe("tracing values in values.schema.json", () => {
  const valid = (tracing: Values) =>
    formatErrors(validateValues(mergeValues(defaults, { tracing })));

  it("accepts the defaults and a full setting", () => {
    expect(valid({})).toBe("");
    expect(
      valid({
        enabled: true,
        endpoint: "https://otlp.example.com/otlp",
        protocol: "http/json",
        serviceName: "egress",
        sampler: "parentbased_traceidratio",
        samplerArg: "0.25",
        resourceAttributes: "deployment.environment.name=prod,team=payments",
        headersSecret: { name: "otel-auth", key: "headers" },
      }),
    ).toBe("");
    // `--set tracing.samplerArg=0` makes a number.
    expect(valid({ samplerArg: 0 })).toBe("");
  });

  it.each([
    ["a gRPC protocol", { protocol: "grpc" }, /\/tracing\/protocol must be equal to one of/],
    ["an unknown sampler", { sampler: "sometimes" }, /\/tracing\/sampler must be equal to one of/],
    ["a ratio over 1", { samplerArg: "1.5" }, /\/tracing\/samplerArg/],
    ["a ratio as a number over 1", { samplerArg: 2 }, /\/tracing\/samplerArg/],
    [
      "an endpoint without scheme",
      { endpoint: "collector:4318" },
      /\/tracing\/endpoint must match/,
    ],
    ["attributes that are not key=value", { resourceAttributes: "prod" }, /resourceAttributes/],
    [
      "a headers Secret without key",
      { headersSecret: { name: "otel-auth", key: "" } },
      /headersSecret\/key/,
    ],
    ["a misspelt key", { endpiont: "http://c:4318" }, /\/tracing must NOT have additional/],
  ])("rejects %s", (_name, tracing, message) => {
    expect(valid(tracing)).toMatch(message);
  });
});

describe.skipIf(!helm)("tracing in the rendered chart (helm binary found)", () => {
  it("renders no OTEL_* (and no env at all) when off", () => {
    const objects = render([]);
    expect(containerEnv(objects)).toBeUndefined();
    expect(JSON.stringify(objects)).not.toContain("OTEL_");
    // extraEnv alone still renders as before.
    expect(containerEnv(render(["extraEnv[0].name=A", "extraEnv[0].value=b"]))).toEqual([
      { name: "A", value: "b" },
    ]);
  });

  it("renders the standard OTEL_* environment when on", () => {
    const env = containerEnv(
      render([
        ...ENABLED,
        "tracing.protocol=http/json",
        "tracing.serviceName=egress-gateway",
        "tracing.sampler=parentbased_traceidratio",
        "tracing.samplerArg=0",
        "tracing.resourceAttributes=deployment.environment.name=prod",
        "tracing.headersSecret.name=otel-auth",
        "tracing.headersSecret.key=headers",
        "extraEnv[0].name=OTEL_EXPORTER_OTLP_COMPRESSION",
        "extraEnv[0].value=gzip",
      ]),
    )!;
    expect(env.map((e) => e.name)).toEqual([
      "OTEL_TRACES_EXPORTER",
      "OTEL_EXPORTER_OTLP_ENDPOINT",
      "OTEL_EXPORTER_OTLP_PROTOCOL",
      "OTEL_EXPORTER_OTLP_HEADERS",
      "OTEL_SERVICE_NAME",
      "OTEL_TRACES_SAMPLER",
      "OTEL_TRACES_SAMPLER_ARG",
      "OTEL_RESOURCE_ATTRIBUTES_POD_NAME",
      "OTEL_RESOURCE_ATTRIBUTES_NAMESPACE",
      "OTEL_RESOURCE_ATTRIBUTES",
      // extraEnv last: it may refer to the ones above.
      "OTEL_EXPORTER_OTLP_COMPRESSION",
    ]);
    expect(byName(env)).toEqual({
      OTEL_TRACES_EXPORTER: "otlp",
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://otel-collector.observability:4318",
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_EXPORTER_OTLP_HEADERS: { secretKeyRef: { name: "otel-auth", key: "headers" } },
      OTEL_SERVICE_NAME: "egress-gateway",
      OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
      // 0 is a ratio, not "unset".
      OTEL_TRACES_SAMPLER_ARG: "0",
      OTEL_RESOURCE_ATTRIBUTES_POD_NAME: { fieldRef: { fieldPath: "metadata.name" } },
      OTEL_RESOURCE_ATTRIBUTES_NAMESPACE: { fieldRef: { fieldPath: "metadata.namespace" } },
      OTEL_RESOURCE_ATTRIBUTES: expect.any(String),
      OTEL_EXPORTER_OTLP_COMPRESSION: "gzip",
    });

    // What bearer-proxy reads once the kubelet expanded $(…) (tracing-settings.ts parses it).
    const attributes = expand(byName(env).OTEL_RESOURCE_ATTRIBUTES as string, {
      OTEL_RESOURCE_ATTRIBUTES_POD_NAME: "rel-bearer-proxy-7d9c-abcde",
      OTEL_RESOURCE_ATTRIBUTES_NAMESPACE: "egress",
    });
    const warnings: string[] = [];
    expect(
      parseKeyValueList(attributes, "OTEL_RESOURCE_ATTRIBUTES", (w) => warnings.push(w)),
    ).toEqual({
      "k8s.namespace.name": "egress",
      "k8s.pod.name": "rel-bearer-proxy-7d9c-abcde",
      "k8s.deployment.name": "rel-bearer-proxy",
      "deployment.environment.name": "prod",
    });
    expect(warnings).toEqual([]);
  });

  it("leaves out what is empty: bearer-proxy's defaults apply", () => {
    const env = byName(containerEnv(render(["tracing.enabled=true"])));
    expect(Object.keys(env)).toEqual([
      "OTEL_TRACES_EXPORTER",
      "OTEL_EXPORTER_OTLP_PROTOCOL",
      "OTEL_RESOURCE_ATTRIBUTES_POD_NAME",
      "OTEL_RESOURCE_ATTRIBUTES_NAMESPACE",
      "OTEL_RESOURCE_ATTRIBUTES",
    ]);
    expect(env.OTEL_EXPORTER_OTLP_PROTOCOL).toBe("http/protobuf");
  });

  it("lets a resourceAttributes key win over the chart's", () => {
    const env = byName(
      containerEnv(
        render(["tracing.enabled=true", "tracing.resourceAttributes=k8s.deployment.name=egress"]),
      ),
    );
    const parsed = parseKeyValueList(env.OTEL_RESOURCE_ATTRIBUTES as string, "x", () => {});
    expect(parsed["k8s.deployment.name"]).toBe("egress");
  });

  it("fails a headers Secret without a key", () => {
    const result = runHelm([
      "template",
      "rel",
      CHART_DIR,
      "--set",
      "existingSecret=creds",
      "--set",
      "tracing.enabled=true",
      "--set",
      "tracing.headersSecret.name=otel-auth",
    ]);
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/tracing\.headersSecret|headersSecret\/key/);
  });

  it("keeps the collector headers out of the rendered objects", () => {
    const text = runHelm([
      "template",
      "rel",
      CHART_DIR,
      "--set",
      "existingSecret=creds",
      "--set",
      "tracing.enabled=true",
      "--set",
      "tracing.headersSecret.name=otel-auth",
      "--set",
      "tracing.headersSecret.key=headers",
    ]).stdout;
    expect(text).toContain("secretKeyRef");
    expect(text).not.toMatch(/OTEL_EXPORTER_OTLP_HEADERS\s*\n\s*value:/);
  });

  describe("NetworkPolicy", () => {
    const egressPorts = (objects: K8sObject[]) => {
      const np = objects.find((o) => o.kind === "NetworkPolicy") as unknown as {
        spec: { egress: { ports?: { port: number }[]; to?: Values[] }[] };
      };
      return np.spec.egress;
    };

    it.each([
      ["http://otel-collector.observability:4318", 4318],
      ["https://otlp.example.com/otlp", 443],
      ["http://collector", 80],
    ])("opens egress to %s's port", (endpoint, port) => {
      const egress = egressPorts(
        render([
          "networkPolicy.enabled=true",
          "tracing.enabled=true",
          `tracing.endpoint=${endpoint}`,
        ]),
      );
      const rule = egress.at(-1)!;
      expect(rule).toEqual({ ports: [{ port, protocol: "TCP" }] });
    });

    it("limits it to networkPolicy.egress.tracing.to when given", () => {
      const egress = egressPorts(
        render([
          "networkPolicy.enabled=true",
          ...ENABLED,
          "networkPolicy.egress.tracing.to[0].namespaceSelector.matchLabels.name=observability",
        ]),
      );
      expect(egress.at(-1)).toEqual({
        ports: [{ port: 4318, protocol: "TCP" }],
        to: [{ namespaceSelector: { matchLabels: { name: "observability" } } }],
      });
    });

    it("adds no rule when tracing is off or has no endpoint (localhost)", () => {
      const off = egressPorts(render(["networkPolicy.enabled=true"]));
      const local = egressPorts(render(["networkPolicy.enabled=true", "tracing.enabled=true"]));
      const endpointOnly = egressPorts(
        render(["networkPolicy.enabled=true", "tracing.endpoint=http://c:4318"]),
      );
      expect(local).toEqual(off);
      expect(endpointOnly).toEqual(off);
    });
  });

  describe("bearer-proxy.sidecar with a tracing parameter", () => {
    const dir = mkdtempSync(join(tmpdir(), "bp-parent-tracing-"));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    it("renders the same OTEL_* entries, before the caller's env", () => {
      mkdirSync(join(dir, "charts"), { recursive: true });
      mkdirSync(join(dir, "templates"));
      cpSync(CHART_DIR, join(dir, "charts", "bearer-proxy"), { recursive: true });
      writeFileSync(
        join(dir, "Chart.yaml"),
        "apiVersion: v2\nname: app\nversion: 0.1.0\ndependencies:\n  - name: bearer-proxy\n    version: 0.1.0\n",
      );
      writeFileSync(
        join(dir, "values.yaml"),
        [
          "bearer-proxy:",
          "  mode: sidecar",
          "  tracing:",
          "    enabled: true",
          "    endpoint: http://otel-collector.observability:4318",
          "    serviceName: checkout-egress",
          "",
        ].join("\n"),
      );
      writeFileSync(
        join(dir, "templates", "pod.yaml"),
        [
          "apiVersion: v1",
          "kind: Pod",
          "metadata:",
          "  name: app",
          "spec:",
          "  initContainers:",
          '    {{- include "bearer-proxy.sidecar" (dict "baseUrl" "https://api.example.com" "secretName" "api-credentials" "tracing" (index .Values "bearer-proxy" "tracing") "env" (list (dict "name" "EXTRA" "value" "1"))) | nindent 4 }}',
          "  containers: []",
          "",
        ].join("\n"),
      );
      const result = runHelm(["template", "p", dir]);
      expect(result.stderr).toBe("");
      const pod = parse(result.stdout) as { spec: { initContainers: { env: EnvVar[] }[] } };
      const env = pod.spec.initContainers[0]!.env;
      const names = env.map((e) => e.name);
      expect(names.slice(names.indexOf("OTEL_TRACES_EXPORTER"))).toEqual([
        "OTEL_TRACES_EXPORTER",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_SERVICE_NAME",
        "OTEL_RESOURCE_ATTRIBUTES_POD_NAME",
        "OTEL_RESOURCE_ATTRIBUTES_NAMESPACE",
        "OTEL_RESOURCE_ATTRIBUTES",
        "EXTRA",
      ]);
      // No Deployment of its own: no k8s.deployment.name.
      expect(byName(env).OTEL_RESOURCE_ATTRIBUTES).toBe(
        "k8s.namespace.name=$(OTEL_RESOURCE_ATTRIBUTES_NAMESPACE),k8s.pod.name=$(OTEL_RESOURCE_ATTRIBUTES_POD_NAME)",
      );
    });
  });
});
