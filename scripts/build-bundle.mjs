/**
 * Build step after `tsc` and the config validator: bundles the CLI (dist/cli.js and what it
 * imports, dependencies included) into dist/bundle/ — `cli.cjs` and its chunks, CommonJS, no
 * node_modules needed — which the container image and the packed CLI run. What it is for:
 * loading ~360 ES modules through Node's ES loader is most of a start (resolution, one file read
 * and compile each, linking); a bundle does one read and compile per chunk
 * (bench/PROFILE.md, "Footprint: the bundle").
 *
 * Code that is loaded on first use stays out of the start: every `import()` becomes a chunk of
 * its own (tracing SDK, DPoP, the callers' authenticator, interception leaves, YAML, the
 * emulator, the commands other than `run`), and the few modules the sources load with a
 * synchronous require on first use become entries of their own (LAZY_ENTRIES) that the bundle
 * requires by file name when that moment comes. `node:http2` is loaded only when HTTP/2 is used
 * (fastify and undici require it eagerly; see LAZY_BUILTINS), and `node:zlib` and `node:https`
 * only if prom-client's Pushgateway, which the proxy never uses, is ever asked for.
 *
 * Not bundled: `@node-rs/bcrypt`, a native addon (its `.node` file can't be inlined); the
 * callers' password checks fall back to bcryptjs (bundled) with a warning where it is missing.
 *
 *   node scripts/build-bundle.mjs [--out DIR] [--single-file]
 * --single-file inlines every chunk into one file (the single executable's input,
 * scripts/build-sea.mjs); pino's worker transport (`log.format: pretty`) then has no file to
 * run and the logger falls back to JSON lines.
 */
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { rolldown } from "rolldown";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const DIST = join(ROOT, "dist");

/**
 * Modules required synchronously on first use (by our sources through `createRequire`, which a
 * bundler can't follow, or by a dependency inside a function): each becomes its own entry file,
 * required by name from the bundle when that first use comes. `from`: the files (relative to
 * the repository) whose require is redirected; a bundler would otherwise put the module's source
 * into the start's chunk, where it costs memory even unevaluated.
 */
export const LAZY_ENTRIES = {
  "lazy-redis": { specifier: "redis", from: ["dist/base/redis-clients.js"] },
  // fastify's default schema compilers, which no admin route uses (lazy-schema-compilers.ts).
  "lazy-ajv-compiler": {
    specifier: "@fastify/ajv-compiler",
    from: ["dist/admin/lazy-schema-compilers.js", "node_modules/fastify/lib/schema-controller.js"],
  },
  // The in-process pretty printer of a single executable (observability/logger.ts); the same
  // file as pino's worker transport target.
  "pino-pretty": { specifier: "pino-pretty", from: ["dist/observability/logger.js"] },
  // fastify's `inject` (light-my-request, ~70 KB of source): the admin server never injects;
  // only tests do, and they run the sources.
  "lazy-inject": { specifier: "light-my-request", from: ["node_modules/fastify/fastify.js"] },
  "lazy-serializer-compiler": {
    specifier: "@fastify/fast-json-stringify-compiler",
    from: ["dist/admin/lazy-schema-compilers.js", "node_modules/fastify/lib/schema-controller.js"],
  },
};

/**
 * pino runs `log.format: pretty` in a worker thread from files it finds by path (thread-stream's
 * worker, which imports the target, pino-pretty.cjs of LAZY_ENTRIES); bundlers tell it where
 * they put them (pino's documented `globalThis.__bundlerPathsOverrides`, PINO_PATHS_BANNER).
 */
const WORKER_ENTRIES = {
  "thread-stream-worker": "thread-stream/lib/worker.js",
};

/** Not bundled: loaded from node_modules at run time, with a fallback where missing. */
export const EXTERNAL = ["@node-rs/bcrypt"];

/**
 * Source rewrites, each checked to apply exactly as often as stated (a dependency or a source
 * that changed shape fails the build instead of silently bundling the wrong thing).
 */
function rewritesFor(id) {
  const inDist = id.startsWith(`${DIST}/`) ? relative(DIST, id) : undefined;
  const rules = [];
  if (inDist !== undefined) {
    // `createRequire(import.meta.url)(x)` is a require the bundler can see once it is plain.
    rules.push({
      find: /const require = createRequire\((?:createRequire\(import\.meta\.url\)\.resolve\("fastify"\)|import\.meta\.url)\);\n/g,
      replace: "",
      times: "any",
    });
    rules.push({
      find: /createRequire\(import\.meta\.url\)\("([^"]+)"\)/g,
      replace: (match, specifier) =>
        EXTERNAL.includes(specifier) ? match : `require("${specifier}")`,
      times: "any",
    });
  }
  if (inDist === "version.js") {
    // One file: no package.json beside it to read the version from.
    const { version } = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
    rules.push({
      find: /export const VERSION = readVersion\(\);/,
      replace: `export const VERSION = ${JSON.stringify(version)};`,
      times: 1,
    });
  }
  if (inDist === "config/config-schema.js") {
    // The generated validators are part of the bundle, not files found by URL: the quick one
    // in a chunk of its own, the detailed one in another that only a failing check loads.
    rules.push(
      {
        find: /existsSync\(GENERATED\)\s*\?\s*import\(GENERATED\.href\)\s*:\s*import\("\.\/config-schema-compile\.js"\)\.then\(\(m\) => m\.compileConfigSchema\(\)\)/,
        replace: 'import("./config-schema.generated.js")',
        times: 1,
      },
      {
        find: /existsSync\(GENERATED_REPORT\)\s*\?\s*import\(GENERATED_REPORT\.href\)\.then\(\(m\) => m\.validate\)\s*:\s*import\("\.\/config-schema-compile\.js"\)\.then\(\(m\) => m\.compileConfigReport\(\)\)/,
        replace: 'import("./config-schema-report.generated.js").then((m) => m.validate)',
        times: 1,
      },
    );
  }
  if (id.endsWith("/node_modules/fastify/lib/server.js")) {
    rules.push({
      find: "const http2 = require('node:http2')",
      replace:
        "const http2 = { get createServer () { return require('node:http2').createServer }, get createSecureServer () { return require('node:http2').createSecureServer } }",
      times: 1,
    });
  }
  if (id.endsWith("/node_modules/prom-client/index.js")) {
    // The Pushgateway's module requires node:zlib (gzipSync), node:http and node:https as it loads.
    rules.push({
      find: "exports.Pushgateway = require('./lib/pushgateway');",
      replace:
        "Object.defineProperty(exports, 'Pushgateway', { enumerable: true, get: () => require('./lib/pushgateway') });",
      times: 1,
    });
  }
  if (id.endsWith("/node_modules/undici/lib/dispatcher/client.js")) {
    rules.push({
      find: "const connectH2 = require('./client-h2.js')",
      replace: "const connectH2 = (client, socket) => require('./client-h2.js')(client, socket)",
      times: 1,
    });
  }
  return rules;
}

/** See LAZY_BUILTINS in the file comment: which rewrites must have applied once per build. */
const REQUIRED_REWRITES = [
  "dist/version.js",
  "dist/config/config-schema.js",
  "fastify/lib/server.js",
  "undici/lib/dispatcher/client.js",
  "prom-client/index.js",
];

function applyRewrites(code, id, applied) {
  let out = code;
  for (const rule of rewritesFor(id)) {
    let count = 0;
    out = out.replace(rule.find, (...args) => {
      count++;
      return typeof rule.replace === "function" ? rule.replace(...args) : rule.replace;
    });
    if (rule.times !== "any" && count !== rule.times) {
      throw new Error(
        `build-bundle: expected ${rule.times} match(es) of ${rule.find} in ${id}, found ${count}`,
      );
    }
    if (count > 0) applied.add(id);
  }
  return out;
}

function bundlePlugin(applied, { singleFile }) {
  return {
    name: "bearer-proxy-bundle",
    resolveId(source, importer) {
      if (singleFile || importer === undefined) return null;
      const from = relative(ROOT, importer);
      for (const [name, entry] of Object.entries(LAZY_ENTRIES)) {
        if (entry.specifier === source && entry.from.includes(from)) {
          return { id: `./${name}.cjs`, external: true };
        }
      }
      return null;
    },
    transform(code, id) {
      const out = applyRewrites(code, id, applied);
      return out === code ? null : { code: out, map: null };
    },
  };
}

/** Sets pino's worker paths to the bundle's own files (unless the embedder set them). */
const PINO_PATHS_BANNER = `globalThis.__bundlerPathsOverrides ??= { "thread-stream-worker": require("node:path").join(__dirname, "thread-stream-worker.cjs"), "pino-pretty": require("node:path").join(__dirname, "pino-pretty.cjs") };`;

const OUTPUT = {
  format: "cjs",
  // Node keeps a script's source in memory (for lazy compilation): comments and indentation
  // would be held there for nothing, and one non-ASCII character would store the whole file as
  // two bytes per character. Names stay as written (stack traces, fastify's plugin names).
  minify: { compress: false, mangle: false, codegen: { removeWhitespace: true } },
  charset: "ascii",
  comments: false,
};

async function bundleOne({ input, singleFile, applied, outDir, fileName, banner }) {
  const build = await rolldown({
    input,
    platform: "node",
    cwd: ROOT,
    external: [/^node:/, ...EXTERNAL],
    plugins: [bundlePlugin(applied, { singleFile })],
    // A dependency's `eval`, circular import or the like is its own business; errors still fail.
    logLevel: "silent",
  });
  const write = process.env.BUNDLE_STATS ? build.generate.bind(build) : build.write.bind(build);
  const { output } = await write({
    ...OUTPUT,
    dir: outDir,
    entryFileNames: fileName ?? "[name].cjs",
    chunkFileNames: "[name].[hash].cjs",
    codeSplitting: !singleFile,
    ...(banner ? { banner: (chunk) => (chunk.isEntry ? banner : "") } : {}),
  });
  await build.close();
  if (process.env.BUNDLE_STATS) printStats(output);
  return output.map((o) => o.fileName);
}

/** BUNDLE_STATS=1: bytes per package in each chunk (what to look at when a chunk grows). */
function printStats(output) {
  for (const chunk of output) {
    if (chunk.type !== "chunk" || chunk.code.length < 50_000) continue;
    const byPackage = new Map();
    for (const [id, module] of Object.entries(chunk.modules)) {
      const key =
        /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(id)?.[1] ??
        relative(ROOT, id).split("/").slice(0, 2).join("/");
      byPackage.set(key, (byPackage.get(key) ?? 0) + module.renderedLength);
    }
    const top = [...byPackage].sort((a, b) => b[1] - a[1]).slice(0, 12);
    process.stderr.write(
      `${chunk.fileName} ${chunk.code.length}: ${top.map(([k, v]) => `${k} ${v}`).join(", ")}\n`,
    );
  }
}

/** Build the bundle into `outDir`; resolves with the files written. */
export async function buildBundle({ outDir = join(DIST, "bundle"), singleFile = false } = {}) {
  if (
    !existsSync(join(DIST, "cli.js")) ||
    !existsSync(join(DIST, "config/config-schema.generated.js"))
  ) {
    throw new Error(
      "build-bundle: run `tsc` and scripts/build-config-schema.mjs first (npm run build)",
    );
  }
  // A source that moved would silently put its lazy module back into the start's chunk.
  for (const [name, entry] of Object.entries(LAZY_ENTRIES)) {
    const missing = entry.from.filter((file) => !existsSync(join(ROOT, file)));
    if (missing.length > 0) {
      throw new Error(`build-bundle: LAZY_ENTRIES.${name} names ${missing.join(", ")}, not found`);
    }
  }
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  const applied = new Set();
  const files = await bundleOne({
    // The bundle's entry installs the code cache before the CLI's chunks load; the single file
    // (the executable's input) has no chunks to load, and a code cache of its own (build-sea.mjs).
    input: { cli: join(DIST, singleFile ? "cli.js" : "bundle-entry.js") },
    singleFile,
    applied,
    outDir,
    banner: singleFile ? "" : PINO_PATHS_BANNER,
  });
  if (!singleFile) {
    // Separate builds, one file each: a module shared with the main build would otherwise sit
    // in the lazy file and be loaded at start through it.
    const lazy = [
      ...Object.entries(LAZY_ENTRIES).map(([name, entry]) => [name, entry.specifier]),
      ...Object.entries(WORKER_ENTRIES),
    ];
    for (const [name, specifier] of lazy) {
      files.push(
        ...(await bundleOne({
          input: { [name]: specifier },
          singleFile: true,
          applied,
          outDir,
        })),
      );
    }
  }
  for (const required of REQUIRED_REWRITES) {
    if (![...applied].some((id) => id.endsWith(required.replace(/^dist\//, "/dist/")))) {
      throw new Error(`build-bundle: the rewrite of ${required} did not apply (was it bundled?)`);
    }
  }
  return files;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { values } = parseArgs({
    options: { out: { type: "string" }, "single-file": { type: "boolean", default: false } },
  });
  const files = await buildBundle({
    outDir: values.out ? resolve(values.out) : undefined,
    singleFile: values["single-file"],
  });
  process.stderr.write(`build-bundle: ${files.length} file(s) in ${values.out ?? "dist/bundle"}\n`);
}
