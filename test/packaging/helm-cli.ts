/**
 * The real `helm` binary for the chart tests: `HELM_BIN`, or `helm` on the PATH; `helm` is
 * undefined without one (those tests skip). `renderChart` runs `helm template` and returns the
 * rendered objects, failing the test on any stderr or a non-zero exit.
 */
import { spawnSync } from "node:child_process";
import { accessSync, constants, readFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { expect } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import { CHART_DIR, type Values } from "./schema-tools.js";

function findHelm(): string | undefined {
  const candidates = [
    process.env.HELM_BIN,
    ...(process.env.PATH ?? "").split(delimiter).map((d) => join(d, "helm")),
  ];
  for (const candidate of candidates) {
    if (!candidate) continue;
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {}
  }
  return undefined;
}

export const helm = findHelm();

export function runHelm(args: string[]): { status: number; stdout: string; stderr: string } {
  const result = spawnSync(helm!, args, { encoding: "utf8", timeout: 30_000 });
  return { status: result.status ?? -1, stdout: result.stdout, stderr: result.stderr };
}

export type K8sObject = {
  kind: string;
  metadata: { name: string; annotations?: Record<string, string> };
} & Values;

/** `helm template rel <chart> --namespace egress` with `valueFiles` and `--set`s. */
export function renderChart(valueFiles: string[], sets: string[] = []): K8sObject[] {
  const args = ["template", "rel", CHART_DIR, "--namespace", "egress"];
  for (const f of valueFiles) args.push("-f", f);
  for (const s of sets) args.push("--set", s);
  const result = runHelm(args);
  expect(result.stderr).toBe("");
  expect(result.status).toBe(0);
  return parseAllDocuments(result.stdout)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
}

/** The chart's values.yaml, parsed. */
export const chartDefaults = parse(readFileSync(join(CHART_DIR, "values.yaml"), "utf8")) as Values;
