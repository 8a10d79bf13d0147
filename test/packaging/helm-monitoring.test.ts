/**
 * The chart's Grafana dashboard and Prometheus alerts use only metrics and labels that
 * bearer-proxy really exports (read from its metric registry, not from a copied list).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { POLICY_REFUSAL_CODES } from "../../src/errors.js";
import { createMetrics } from "../../src/observability/metrics.js";
import { CHART_DIR } from "./schema-tools.js";

/** Labels Prometheus adds at scrape time, and `le` of histogram buckets. */
const TARGET_LABELS = new Set(["namespace", "job", "pod", "instance", "service", "le"]);

const registry = createMetrics({ collectProcessMetrics: false }).registry;
const exported = new Map<string, { labels: Set<string> }>();
for (const metric of registry.getMetricsAsArray()) {
  const { name, labelNames } = metric as unknown as { name: string; labelNames?: string[] };
  exported.set(name, { labels: new Set(labelNames ?? []) });
}

/** Metric name of a series name: a histogram's `_bucket`/`_sum`/`_count` series map to it. */
function baseMetric(series: string): string {
  const base = series.replace(/_(bucket|sum|count)$/, "");
  return exported.has(base) ? base : series;
}

/** Every bearer_proxy_* series an expression reads, and the label names it mentions. */
function analyse(expr: string): { metrics: string[]; labels: string[] } {
  const metrics = [...expr.matchAll(/\bbearer_proxy_[a-z_]+/g)].map((m) => baseMetric(m[0]));
  const labels = [
    ...[...expr.matchAll(/\b(?:by|without)\s*\(([^)]*)\)/g)].flatMap((m) => m[1]!.split(",")),
    ...[...expr.matchAll(/[{,]\s*([a-z_]+)\s*(?:=~|!~|!=|=)/g)].map((m) => m[1]!),
  ]
    .map((l) => l.trim())
    .filter((l) => l !== "");
  return { metrics, labels };
}

function checkExpression(expr: string): string[] {
  const { metrics, labels } = analyse(expr);
  const problems = metrics
    .filter((m) => !exported.has(m))
    .map((m) => `unknown metric ${m} in: ${expr}`);
  const known = new Set(metrics.flatMap((m) => [...(exported.get(m)?.labels ?? [])]));
  for (const label of labels) {
    if (!TARGET_LABELS.has(label) && !known.has(label))
      problems.push(`label ${label} is on none of ${metrics.join(", ")}: ${expr}`);
  }
  return problems;
}

interface Panel {
  type: string;
  title: string;
  targets?: { expr: string }[];
}

const dashboard = JSON.parse(
  readFileSync(join(CHART_DIR, "files", "grafana-dashboard.json"), "utf8"),
) as { uid: string; panels: Panel[]; templating: { list: { name: string; query?: unknown }[] } };
const expressions = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));

describe("Grafana dashboard", () => {
  it("reads bearer-proxy's metric registry", () => {
    expect(exported.size).toBeGreaterThanOrEqual(9);
    expect(exported.get("bearer_proxy_token_fetches_total")?.labels).toContain("outcome");
  });

  it("flags an unknown metric or label (the check can fail)", () => {
    expect(checkExpression('rate(bearer_proxy_requests_total{path="/x"}[5m])')).toHaveLength(1);
    expect(checkExpression("bearer_proxy_nope")).toHaveLength(1);
  });

  it("queries only metrics and labels bearer-proxy exports", () => {
    expect(expressions.length).toBeGreaterThan(10);
    expect(expressions.flatMap(checkExpression)).toEqual([]);
  });

  it("shows every metric bearer-proxy exports", () => {
    const shown = new Set(expressions.flatMap((e) => analyse(e).metrics));
    expect([...exported.keys()].filter((m) => !shown.has(m))).toEqual([]);
  });

  it("has a stable uid, unique panel ids and a data source variable", () => {
    expect(dashboard.uid).toBe("bearer-proxy");
    const ids = dashboard.panels.map((p) => (p as unknown as { id: number }).id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(dashboard.templating.list.map((v) => v.name)).toEqual(
      expect.arrayContaining(["datasource", "namespace", "job", "upstream"]),
    );
  });
});

describe("PrometheusRule alerts", () => {
  const template = readFileSync(join(CHART_DIR, "templates", "prometheusrule.yaml"), "utf8");
  const alerts = [...template.matchAll(/- alert: (\w+)\n\s+expr: \|\n((?:\s{12}.*\n)+)/g)].map(
    (m) => ({
      name: m[1]!,
      // The template's selector action becomes concrete matchers, as Helm renders it.
      expr: m[2]!
        .replace(/\{\{-? \$sel -?\}\}/g, 'namespace="ns",job="bp"')
        .replace(/\{\{ \$pr\.[\w.]+ \}\}/g, "1"),
    }),
  );

  it("defines the three alerts of the issue", () => {
    expect(alerts.map((a) => a.name)).toEqual([
      "BearerProxyTokenFetchFailing",
      "BearerProxyTokenExpiringSoon",
      "BearerProxyHighErrorRate",
    ]);
  });

  it.each(alerts)("$name uses only exported metrics and labels", ({ expr }) => {
    expect(expr).not.toMatch(/\{\{/);
    expect(checkExpression(expr)).toEqual([]);
  });

  it("leaves policy refusals (the gateway working) out of the error rate: exactly the proxy's list", () => {
    const excluded = /code!~"([^"]+)"/.exec(alerts[2]?.expr ?? "")?.[1]?.split("|") ?? [];
    expect(excluded.sort()).toEqual([...POLICY_REFUSAL_CODES].sort());
  });

  it("counts failed token fetches as outcome != success, the label value the proxy uses", () => {
    expect(exported.get("bearer_proxy_token_fetches_total")).toBeDefined();
    expect(alerts[0]?.expr).toContain('outcome!="success"');
  });
});
