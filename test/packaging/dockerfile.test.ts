/**
 * The Dockerfile and .dockerignore, read as text (no Docker engine here): a pinned multi-stage
 * build whose runtime stage is distroless, non-root and shell-free, runs the package's own bin,
 * and gets a build context with everything the build copies and nothing it shouldn't.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { args, DOCKERFILE, envValue, parseDockerfile } from "./dockerfile-parse.js";
import { REPO_ROOT } from "./schema-tools.js";

const dockerfile = DOCKERFILE;
const [build = [], runtime = [], ...extra] = parseDockerfile(dockerfile);
const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as {
  version: string;
  license: string;
  bin: Record<string, string>;
  scripts: Record<string, string>;
};

describe("Dockerfile", () => {
  it("has a build stage on the full Node image and a distroless runtime of the same major", () => {
    expect(extra).toEqual([]);
    const builder = /^node:(\d+)-bookworm AS build$/.exec(args(build, "FROM")[0] ?? "");
    const base = /^gcr\.io\/distroless\/nodejs(\d+)-debian12:nonroot AS runtime$/.exec(
      args(runtime, "FROM")[0] ?? "",
    );
    expect(builder?.[1]).toBeDefined();
    expect(Number(builder?.[1])).toBeGreaterThanOrEqual(24);
    expect(base?.[1]).toBe(builder?.[1]);
  });

  it("says where the base image digests go and why they are not filled in", () => {
    expect(dockerfile).toMatch(/# digest: FROM node:24-bookworm@sha256:<digest>/);
    expect(dockerfile).toMatch(
      /# digest: FROM gcr\.io\/distroless\/nodejs24-debian12:nonroot@sha256:<digest>/,
    );
    expect(dockerfile).toMatch(/could not be resolved/);
  });

  it("installs from the lockfile, then compiles and bundles", () => {
    const runs = args(build, "RUN").join("\n");
    expect(runs).toMatch(/npm ci\b/);
    expect(runs).toMatch(/npm run build\b/);
    expect(runs.indexOf("npm ci")).toBeLessThan(runs.indexOf("npm run build"));
    expect(pkg.scripts.build).toMatch(/node scripts\/build-bundle\.mjs/);
  });

  it("runs one command in the runtime stage, in exec form (it has no shell): code-cache, as root", () => {
    expect(args(runtime, "RUN").map((a) => JSON.parse(a))).toEqual([
      ["/nodejs/bin/node", "/app/bundle/cli.cjs", "code-cache"],
    ]);
    expect(args(runtime, "SHELL")).toEqual([]);
    // Written by root after the COPYs, read by 65532: the process cannot change its own cache.
    const order = runtime.map((i) => `${i.keyword} ${i.args}`);
    const at = (line: string) => order.findIndex((l) => l.startsWith(line));
    expect(at("USER 0:0")).toBeGreaterThan(at("COPY --from=build /src/dist/bundle"));
    expect(at("RUN")).toBeGreaterThan(at("USER 0:0"));
    expect(at("USER 65532:65532")).toBeGreaterThan(at("RUN"));
    // Under the flags the image runs with: the ENV comes first.
    expect(at("ENV NODE_ENV=production")).toBeLessThan(at("RUN"));
  });

  it("copies only the bundle and the native bcrypt addon, no node_modules besides", () => {
    const copies = args(runtime, "COPY");
    expect(copies.every((c) => c.startsWith("--from=build "))).toBe(true);
    expect(copies.map((c) => c.replace(/^--from=build\s+/, "")).sort()).toEqual([
      "/src/dist/bundle ./bundle",
      "/src/node_modules/@node-rs ./node_modules/@node-rs",
    ]);
    expect(args(runtime, "WORKDIR")).toEqual(["/app"]);
  });

  it("keeps glibc to two malloc arenas (the compilers' memory under load)", () => {
    expect(args(runtime, "ENV").join(" ")).toMatch(/(^|\s)MALLOC_ARENA_MAX=2(\s|$)/);
  });

  it("runs as numeric non-root user 65532 with NODE_ENV=production", () => {
    expect(args(runtime, "USER").at(-1)).toBe("65532:65532");
    expect(args(runtime, "ENV").join(" ")).toMatch(/(^|\s)NODE_ENV=production(\s|$)/);
  });

  it("caps the young generation at 8 MiB semi-spaces, in a NODE_OPTIONS this Node accepts", () => {
    const value = envValue(runtime, "NODE_OPTIONS");
    expect(value).toBe("--max-semi-space-size=8");
    // Node refuses to start on a flag NODE_OPTIONS does not allow; the suite runs on 20 and 24.
    const run = spawnSync(process.execPath, ["-e", "process.exit(0)"], {
      env: { PATH: process.env.PATH, NODE_OPTIONS: value },
      encoding: "utf8",
    });
    expect(run.stderr).toBe("");
    expect(run.status).toBe(0);
  });

  it("is what the footprint bench measures as `image` (its flag set and the image's ENV agree)", async () => {
    const { FLAG_SETS } = (await import(
      new URL("../../bench/footprint.mjs", import.meta.url).href
    )) as {
      FLAG_SETS: { image: string };
    };
    expect(FLAG_SETS.image).toBe(
      `${envValue(runtime, "NODE_OPTIONS")} MALLOC_ARENA_MAX=${envValue(runtime, "MALLOC_ARENA_MAX")}`,
    );
  });

  it("starts the package's bin (the bundle) with the image's node, `run` by default", () => {
    expect(pkg.bin["bearer-proxy"]).toBe("dist/bundle/cli.cjs");
    expect(JSON.parse(args(runtime, "ENTRYPOINT")[0] ?? "null")).toEqual([
      "/nodejs/bin/node",
      "/app/bundle/cli.cjs",
    ]);
    expect(JSON.parse(args(runtime, "CMD")[0] ?? "null")).toEqual(["run"]);
  });

  it("exposes the proxy and admin ports", () => {
    expect(args(runtime, "EXPOSE")).toEqual(["8080 9901"]);
  });

  it("checks health with the CLI's `wait`, in exec form (no curl, no shell)", () => {
    const healthcheck = args(runtime, "HEALTHCHECK")[0] ?? "";
    const exec = /CMD (\[.*\])$/.exec(healthcheck)?.[1];
    expect(JSON.parse(exec ?? "null")).toEqual([
      "/nodejs/bin/node",
      "/app/bundle/cli.cjs",
      "wait",
      "--timeout",
      "2s",
    ]);
  });

  it("carries the OCI labels, with the package's licence", () => {
    const labels = args(runtime, "LABEL").join(" ");
    for (const key of [
      "title",
      "description",
      "version",
      "revision",
      "created",
      "source",
      "licenses",
    ])
      expect(labels).toContain(`org.opencontainers.image.${key}=`);
    expect(labels).toContain(`org.opencontainers.image.licenses="${pkg.license}"`);
    expect(args(runtime, "ARG")).toContain(`VERSION=${pkg.version}`);
  });
});

/**
 * Docker's .dockerignore rules: patterns are matched against the path and each of its parent
 * folders, the last matching pattern wins, and `!` re-includes.
 */
function isIgnored(path: string, patterns: readonly string[]): boolean {
  let ignored = false;
  for (const raw of patterns) {
    const negate = raw.startsWith("!");
    const pattern = (negate ? raw.slice(1) : raw).replace(/^\/+|\/+$/g, "");
    const source = pattern
      .split(/(\*\*\/|\*\*|\*|\?)/)
      .map((part) => {
        if (part === "**/") return "(?:.*/)?";
        if (part === "**") return ".*";
        if (part === "*") return "[^/]*";
        if (part === "?") return "[^/]";
        return part.replace(/[.+^${}()|[\]\\]/g, "\\$&");
      })
      .join("");
    const regex = new RegExp(`^${source}$`);
    const parts = path.split("/");
    const candidates = parts.map((_p, i) => parts.slice(0, i + 1).join("/"));
    if (candidates.some((c) => regex.test(c))) ignored = !negate;
  }
  return ignored;
}

describe(".dockerignore", () => {
  const patterns = readFileSync(join(REPO_ROOT, ".dockerignore"), "utf8")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));

  it("matches the way Docker does (the check can fail)", () => {
    expect(isIgnored("a/b.txt", ["*", "!a/"])).toBe(false);
    expect(isIgnored("a/node_modules/x.js", ["*", "!a/", "**/node_modules"])).toBe(true);
    expect(isIgnored("b/c.txt", ["*", "!a/"])).toBe(true);
    expect(isIgnored(".env", ["**/.env"])).toBe(true);
    expect(isIgnored("a/b/.env", ["**/.env"])).toBe(true);
    expect(isIgnored("a.env", ["**/.env"])).toBe(false);
  });

  it.each([
    "node_modules/fastify/package.json",
    "dist/cli.js",
    ".git/HEAD",
    ".tmp/notes.md",
    "bench/results/run.json",
    "test/packaging/dockerfile.test.ts",
    "src/proxy/forward.test.ts",
    "coverage/index.html",
    "bearer-proxy-0.1.0.tgz",
    "helm/bearer-proxy/values.yaml",
    "docs/docker.md",
    ".env",
  ])("keeps %s out of the build context", (path) => {
    expect(isIgnored(path, patterns)).toBe(true);
  });

  it("lets in every file the build stage copies", () => {
    const sources = args(build, "COPY")
      .filter((c) => !c.startsWith("--from"))
      .flatMap((c) => c.split(/\s+/).slice(0, -1));
    expect(sources).toEqual(
      expect.arrayContaining([
        "package.json",
        "package-lock.json",
        "src",
        "scripts/build-bundle.mjs",
      ]),
    );
    for (const source of sources) {
      const probe = source === "src" ? "src/cli.ts" : source;
      expect(isIgnored(probe, patterns), source).toBe(false);
    }
    expect(isIgnored("src/config/schema.ts", patterns)).toBe(false);
  });
});
