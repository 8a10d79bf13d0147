/** Shared helpers for the config tests: load YAML text, collect the issues of a failed load. */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { rootCertificates } from "node:tls";
import { expect } from "vitest";
import { type LoadConfigOptions, loadConfigWithWarnings } from "../../src/config/load.js";
import { ConfigError, type ConfigIssue } from "../../src/errors.js";

/** Strip the common indentation of a template literal, so test YAML can be indented with the code. */
export function yaml(strings: TemplateStringsArray, ...values: unknown[]): string {
  const text = strings.reduce(
    (out, s, i) => out + s + (i < values.length ? String(values[i]) : ""),
    "",
  );
  const lines = text.replace(/^\n/, "").split("\n");
  const indent = Math.min(
    ...lines.filter((l) => l.trim() !== "").map((l) => l.length - l.trimStart().length),
  );
  return lines.map((l) => l.slice(indent)).join("\n");
}

/** A valid minimal upstream, to which tests add one mistake. */
export const UPSTREAM = `
  - name: api
    baseUrl: https://api.example.com
    clientId: id
    clientSecret: secret
`;

/** Load and expect failure; returns the issues (and checks the error type). */
export async function issuesOf(options: LoadConfigOptions): Promise<ConfigIssue[]> {
  const error = await loadConfigWithWarnings({ env: {}, ...options }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ConfigError);
  return [...(error as ConfigError).issues];
}

/** Issues of loading `text` as the config file (empty environment unless given). */
export function issuesOfText(
  text: string,
  options: LoadConfigOptions = {},
): Promise<ConfigIssue[]> {
  return issuesOf({ configText: text, ...options });
}

const tempDirs: string[] = [];

/** A fresh temporary folder, removed by `removeTempDirs` (call it in `afterAll`). */
export function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "bp-config-"));
  tempDirs.push(dir);
  return dir;
}

export function removeTempDirs(): void {
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  caFile = undefined;
}

let caFile: string | undefined;

/**
 * A readable PEM file with one real certificate (a system root), for `tls.caFile`; in a
 * `tempDir`, so call `removeTempDirs` in `afterAll`.
 */
export function pemCaFile(): string {
  if (caFile === undefined) {
    caFile = join(tempDir(), "ca.pem");
    writeFileSync(caFile, rootCertificates[0]!);
  }
  return caFile;
}
