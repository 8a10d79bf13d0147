/**
 * The copy-paste sidecar manifests (helm/bearer-proxy/examples/sidecar-*.yaml): the proxy
 * container is hardened, loopback-only and configured with variables bearer-proxy knows and its
 * loader accepts; the native one is a real native sidecar; and the legacy Job's shell script
 * waits for /readyz, does its work and calls /quitquitquit, run here against a local server.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { KNOWN_ENV_VARS } from "../../src/config/env-overrides.js";
import { loadConfigWithWarnings } from "../../src/config/load.js";
import { ConfigError } from "../../src/errors.js";
import { CHART_DIR, type Values } from "./schema-tools.js";

interface Container {
  name: string;
  image: string;
  restartPolicy?: string;
  command?: string[];
  args?: string[];
  env?: { name: string; value?: string }[];
  startupProbe?: { httpGet: { path: string; port: number } };
  livenessProbe?: { httpGet: { path: string; port: number } };
  readinessProbe?: { httpGet: { path: string; port: number } };
  securityContext?: Values;
  volumeMounts?: { name: string; mountPath: string }[];
}
interface PodSpec {
  restartPolicy?: string;
  initContainers?: Container[];
  containers: Container[];
  volumes?: ({ name: string } & Values)[];
}

function readPodSpecs(file: string): PodSpec[] {
  const text = readFileSync(join(CHART_DIR, "examples", file), "utf8");
  return parseAllDocuments(text).map((doc) => {
    expect(doc.errors).toEqual([]);
    const obj = doc.toJS() as { spec: { template: { spec: PodSpec } } };
    return obj.spec.template.spec;
  });
}

function proxyOf(pod: PodSpec): Container {
  const all = [...(pod.initContainers ?? []), ...pod.containers];
  const proxy = all.find((c) => c.image.includes("bearer-proxy"));
  if (!proxy) throw new Error("no bearer-proxy container");
  return proxy;
}

function envOf(c: Container): Record<string, string> {
  return Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value ?? ""]));
}

const native = readPodSpecs("sidecar-native.yaml");
const legacy = readPodSpecs("sidecar-legacy-job.yaml");
const chartImage = /^image:\n {2}(?:#.*\n {2})*repository: (\S+)$/m.exec(
  readFileSync(join(CHART_DIR, "values.yaml"), "utf8"),
)?.[1];
const chartVersion = /appVersion: "([^"]+)"/.exec(
  readFileSync(join(CHART_DIR, "Chart.yaml"), "utf8"),
)?.[1];

describe.each([
  ["sidecar-native.yaml", native],
  ["sidecar-legacy-job.yaml", legacy],
])("%s", (_file, pods) => {
  const pod = pods[0]!;
  const proxy = proxyOf(pod);
  const env = envOf(proxy);

  it("uses the chart's image (the one you build and push: docs/docker.md) and version", () => {
    expect(proxy.image).toBe(`${chartImage}:${chartVersion}`);
  });

  it("sets only variables bearer-proxy knows", () => {
    const unknown = Object.keys(env).filter((n) => !KNOWN_ENV_VARS.includes(n));
    expect(unknown).toEqual(["NODE_OPTIONS", "MALLOC_ARENA_MAX", "MALLOC_TRIM_THRESHOLD_"]);
    // Memory is reserved on every pod: the sidecar trades a little CPU for ~30 MiB (PROFILE.md).
    expect(env.NODE_OPTIONS).toBe("--max-semi-space-size=1 --v8-pool-size=1");
    expect(env.MALLOC_ARENA_MAX).toBe("2");
  });

  it("listens on loopback and serves admin on all interfaces for the probes", () => {
    expect(env.BEARER_PROXY_LISTEN).toBe("127.0.0.1:8080");
    expect(env.BEARER_PROXY_ADMIN_LISTEN).toBe("0.0.0.0:9901");
    for (const probe of [proxy.startupProbe, proxy.livenessProbe, proxy.readinessProbe]) {
      if (probe) expect(probe.httpGet.port).toBe(9901);
    }
  });

  it("runs hardened: non-root 65532, read-only root, no capabilities, seccomp", () => {
    expect(proxy.securityContext).toMatchObject({
      runAsNonRoot: true,
      runAsUser: 65532,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"] },
      seccompProfile: { type: "RuntimeDefault" },
    });
    expect(proxy.volumeMounts?.map((m) => m.mountPath)).toContain("/tmp");
  });

  it("mounts only volumes the pod defines, and reads its credentials from one", () => {
    const volumes = new Set(pod.volumes?.map((v) => v.name));
    for (const c of [...(pod.initContainers ?? []), ...pod.containers])
      for (const m of c.volumeMounts ?? []) expect(volumes, m.name).toContain(m.name);
    const secretMount = proxy.volumeMounts?.find((m) =>
      pod.volumes?.some((v) => v.name === m.name && "secret" in v),
    );
    expect(env.BEARER_PROXY_CLIENT_SECRET_FILE?.startsWith(`${secretMount?.mountPath}/`)).toBe(
      true,
    );
    expect(env.BEARER_PROXY_CLIENT_ID_FILE?.startsWith(`${secretMount?.mountPath}/`)).toBe(true);
  });

  it("is a configuration bearer-proxy's loader accepts (files aside)", async () => {
    let problems: string[] = [];
    try {
      await loadConfigWithWarnings({ env, cwd: tmpdir() });
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      problems = error.issues
        .map((i) => `${i.path}: ${i.message}`)
        .filter((p) => !/expected a readable file, found nothing/.test(p));
    }
    expect(problems).toEqual([]);
  });
});

describe("sidecar-native.yaml", () => {
  it("makes the proxy a native sidecar the app waits for", () => {
    const pod = native[0]!;
    const proxy = pod.initContainers?.[0];
    expect(proxy?.image).toContain("bearer-proxy");
    expect(proxy?.restartPolicy).toBe("Always");
    expect(proxy?.startupProbe?.httpGet.path).toBe("/startup");
    expect(pod.containers.some((c) => c.image.includes("bearer-proxy"))).toBe(false);
  });
});

describe("sidecar-legacy-job.yaml", () => {
  const pod = legacy[0]!;
  const app = pod.containers.find((c) => !c.image.includes("bearer-proxy"))!;
  const script = app.args?.[0] ?? "";
  let server: Server | undefined;
  let workDir: string | undefined;

  afterEach(async () => {
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    server = undefined;
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  it("is a plain container pair in a pod that never restarts", () => {
    expect(pod.initContainers).toBeUndefined();
    expect(pod.restartPolicy).toBe("Never");
    expect(proxyOf(pod).restartPolicy).toBeUndefined();
    expect(app.command).toEqual(["/bin/sh", "-c"]);
  });

  /** A stand-in for the proxy's two listeners, recording what the script asked. */
  async function startFakeProxy(opts: { notReadyTimes: number; apiStatus: number }) {
    const calls: string[] = [];
    let readyChecks = 0;
    server = createServer((req, res) => {
      calls.push(`${req.method} ${req.url}`);
      if (req.url === "/readyz") {
        readyChecks++;
        res.statusCode = readyChecks > opts.notReadyTimes ? 200 : 503;
      } else if (req.url === "/quitquitquit" && req.method === "POST") {
        // As the real endpoint: a plain form POST is refused (issue 14).
        res.statusCode = req.headers["content-type"] === "application/json" ? 202 : 403;
        if (res.statusCode === 403) calls.push("refused");
      } else if (req.url?.startsWith("/platform/v1/")) res.statusCode = opts.apiStatus;
      else res.statusCode = 404;
      res.end("{}");
    });
    await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
    return { port: (server.address() as AddressInfo).port, calls };
  }

  /** Runs the Job's script with its ports pointed at the fake and its waits shortened. */
  async function runScript(port: number, maxTries = 120): Promise<number> {
    workDir = mkdtempSync(join(tmpdir(), "bp-job-"));
    const adapted = script
      .replaceAll("127.0.0.1:9901", `127.0.0.1:${port}`)
      .replaceAll("127.0.0.1:8080", `127.0.0.1:${port}`)
      .replaceAll("/tmp/", `${workDir}/`)
      .replaceAll("-ge 120", `-ge ${maxTries}`)
      .replaceAll("sleep 1", "sleep 0.05");
    expect(adapted).not.toBe(script);
    const child = spawn("/bin/sh", ["-c", adapted], { stdio: "ignore" });
    return new Promise((resolve) => child.on("exit", (code) => resolve(code ?? -1)));
  }

  const hasWget = (() => {
    try {
      return readFileSync("/usr/bin/wget").length > 0;
    } catch {
      return false;
    }
  })();

  it.skipIf(!hasWget)("waits for /readyz, calls the API, then /quitquitquit", async () => {
    const fake = await startFakeProxy({ notReadyTimes: 2, apiStatus: 200 });
    expect(await runScript(fake.port)).toBe(0);
    expect(fake.calls).toEqual([
      "GET /readyz",
      "GET /readyz",
      "GET /readyz",
      "GET /platform/v1/spreadsheets/1234",
      "POST /quitquitquit",
    ]);
  });

  it.skipIf(!hasWget)("still stops the proxy when the work fails, and fails the Job", async () => {
    const fake = await startFakeProxy({ notReadyTimes: 0, apiStatus: 500 });
    expect(await runScript(fake.port)).not.toBe(0);
    expect(fake.calls.at(-1)).toBe("POST /quitquitquit");
  });

  it.skipIf(!hasWget)("gives up when the proxy never becomes ready", async () => {
    const fake = await startFakeProxy({ notReadyTimes: 1000, apiStatus: 200 });
    expect(await runScript(fake.port, 3)).toBe(1);
    expect(fake.calls.filter((c) => c === "GET /readyz")).toHaveLength(3);
    expect(fake.calls.at(-1)).toBe("POST /quitquitquit");
    expect(fake.calls.some((c) => c.includes("/platform/"))).toBe(false);
  });
});
