/** The Dockerfile read as text (no Docker engine here): instructions per stage. */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "./schema-tools.js";

export interface Instruction {
  keyword: string;
  args: string;
}

/** Instructions per stage, continuation lines joined and comments dropped. */
export function parseDockerfile(text: string): Instruction[][] {
  const stages: Instruction[][] = [];
  const logical = text
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
  for (const line of logical) {
    const [keyword = "", ...rest] = line.split(/\s+/);
    const instruction = { keyword: keyword.toUpperCase(), args: rest.join(" ") };
    if (instruction.keyword === "FROM") stages.push([]);
    stages[stages.length - 1]?.push(instruction);
  }
  return stages;
}

/** The repository's Dockerfile, as text. */
export const DOCKERFILE = readFileSync(join(REPO_ROOT, "Dockerfile"), "utf8");

/** The arguments of every `keyword` instruction of a stage. */
export function args(stage: Instruction[], keyword: string): string[] {
  return stage.filter((i) => i.keyword === keyword).map((i) => i.args);
}

/** The value of `name` in a stage's ENV instructions, written `NAME="value"` or `NAME=value`. */
export function envValue(stage: Instruction[], name: string): string | undefined {
  const env = args(stage, "ENV").join(" ");
  const match = new RegExp(`(?:^|\\s)${name}=(?:"([^"]*)"|([^\\s"]*))`).exec(env);
  return match?.[1] ?? match?.[2];
}
