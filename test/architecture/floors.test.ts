/**
 * The house's floors (issue 31): every import in src/ goes to the same area or to a lower floor.
 * The ground floor (src/base, errors.ts, version.ts) imports nothing of ours above it; config
 * imports only itself and the ground floor; rooms on one floor do not import each other.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const SRC = join(dirname(fileURLToPath(import.meta.url)), "../../src");

/** Each area's floor; an import may only go down (or stay within its own area). */
const FLOORS: Record<string, number> = {
  base: 0,
  config: 1,
  observability: 2,
  net: 2,
  token: 3,
  callers: 3,
  pacing: 3,
  intercept: 3,
  reload: 3,
  emulator: 3,
  lifecycle: 3,
  proxy: 4,
  admin: 4,
  app: 5,
  main: 6,
  index: 6,
  commands: 7,
  cli: 8,
  // The bundle's entry: sets up the code cache, then loads the CLI.
  "bundle-entry": 9,
};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

/** The ground floor's two files at the top of src/ belong to base. */
const GROUND_FILES = new Set(["errors", "version"]);

/** `proxy/pipeline/x.ts` → `proxy`; `errors.ts` → `base`. */
function areaOf(file: string): string {
  const [first] = relative(SRC, file).split("/");
  const area = (first ?? "").replace(/\.(ts|js)$/, "");
  return GROUND_FILES.has(area) ? "base" : area;
}

const IMPORT = /(?:\bfrom|\bimport)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g;

interface Crossing {
  from: string;
  to: string;
}

function crossings(): Crossing[] {
  const found: Crossing[] = [];
  for (const file of sourceFiles(SRC)) {
    const text = readFileSync(file, "utf8");
    for (const match of text.matchAll(IMPORT)) {
      const target = normalize(join(dirname(file), match[1] ?? ""));
      found.push({ from: relative(SRC, file), to: relative(SRC, target) });
    }
  }
  return found;
}

describe("floors", () => {
  const all = crossings();

  it("reads the imports (the scan finds the wiring's imports)", () => {
    expect(all.length).toBeGreaterThan(500);
    expect(all.some((c) => c.from.startsWith("app/") && c.to.startsWith("proxy/"))).toBe(true);
  });

  it("every area has a floor", () => {
    const areas = new Set(all.flatMap((c) => [areaOf(join(SRC, c.from)), areaOf(join(SRC, c.to))]));
    expect([...areas].filter((area) => FLOORS[area] === undefined)).toEqual([]);
  });

  it("no import goes up or sideways to another room of the same floor", () => {
    const wrong = all
      .filter((c) => {
        const from = areaOf(join(SRC, c.from));
        const to = areaOf(join(SRC, c.to));
        return from !== to && (FLOORS[to] ?? 99) >= (FLOORS[from] ?? -1);
      })
      .map((c) => `${c.from} -> ${c.to}`);
    expect(wrong).toEqual([]);
  });

  it("config imports only itself and the ground floor", () => {
    const wrong = all
      .filter((c) => c.from.startsWith("config/"))
      .filter((c) => (FLOORS[areaOf(join(SRC, c.to))] ?? 99) > 1)
      .map((c) => `${c.from} -> ${c.to}`);
    expect(wrong).toEqual([]);
  });
});
