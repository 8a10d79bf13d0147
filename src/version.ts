/** The package version, read once from package.json (works from src/ under vitest and from dist/). */
import { readFileSync } from "node:fs";

function readVersion(): string {
  for (const rel of ["../package.json", "../../package.json"]) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), "utf8")) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === "bearer-proxy" && pkg.version) return pkg.version;
    } catch {
      // try the next location
    }
  }
  return "0.0.0";
}

export const VERSION = readVersion();
