/**
 * The real CLI reloads: SIGHUP after the config file changed serves the new route in the same
 * process, and a Kubernetes ConfigMap-style update (a `..data` symlink swapped to a new folder;
 * the file itself is never written) is picked up without any signal.
 */
import { mkdirSync, renameSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  emulatorConfigYaml,
  httpCall,
  logRecords,
  pollUntil,
  useCliProcesses,
  useTempDir,
  waitUntilReady,
} from "../cli/helpers.js";
import { useEmulator } from "../helpers/emulator.js";

describe("bearer-proxy run: config reload", () => {
  const emulator = useEmulator();
  const cli = useCliProcesses();
  const dir = useTempDir("bp-reload-cli-");

  /** The one-upstream config plus a second upstream on `/second`. */
  const withSecondRoute = () =>
    `${emulatorConfigYaml(emulator())}    match: { pathPrefix: /emu }
    stripPrefix: true
  - name: second
    baseUrl: ${emulator().url}
    clientId: demo-client
    clientSecret: demo-secret
    tls: { caFile: ${JSON.stringify(emulator().caFile)} }
    match: { pathPrefix: /second }
    stripPrefix: true
`;
  const statusOf = async (url: string) => (await httpCall(url)).status;

  it("SIGHUP reloads the changed file: the new route is served by the same process", async () => {
    const file = join(dir(), "sighup.yaml");
    writeFileSync(file, emulatorConfigYaml(emulator()));
    const proc = cli.start(["run", "--config", file]);
    const { proxyUrl, adminUrl } = await proc.ports();
    await waitUntilReady(adminUrl);
    expect(await statusOf(`${proxyUrl}/second/echo/x`)).not.toBe(200);

    // SIGHUP without a change: reloads (applied), never ends the process.
    proc.child.kill("SIGHUP");
    await proc.waitForOutput(/"trigger":"SIGHUP","outcome":"applied"/, 10_000);

    writeFileSync(file, withSecondRoute());
    proc.child.kill("SIGHUP");
    await pollUntil(
      async () => (await statusOf(`${proxyUrl}/second/echo/x`)) === 200,
      10_000,
      "the new route served",
    );
    expect(await statusOf(`${proxyUrl}/emu/echo/x`)).toBe(200);
    expect(proc.child.exitCode).toBeNull();
    expect(proc.child.signalCode).toBeNull();
    const reloads = logRecords(proc.stdout()).filter((r) => r.msg === "config reloaded");
    expect(reloads.length).toBeGreaterThanOrEqual(2);
    const metrics = (await httpCall(`${adminUrl}/metrics`)).body;
    expect(metrics).toMatch(/^bearer_proxy_config_reloads_total\{outcome="applied"\} [2-9]$/m);
  }, 40_000);

  it("an invalid file is logged with its problems and the process keeps serving", async () => {
    const file = join(dir(), "invalid.yaml");
    writeFileSync(file, emulatorConfigYaml(emulator()));
    const proc = cli.start(["run", "--config", file]);
    const { proxyUrl, adminUrl } = await proc.ports();
    await waitUntilReady(adminUrl);
    writeFileSync(file, "listen: { port: not-a-port }\nupstreams: []\n");
    proc.child.kill("SIGHUP");
    await proc.waitForOutput(/config reload rejected/, 10_000);
    expect(await statusOf(`${proxyUrl}/echo/x`)).toBe(200);
    expect(proc.child.exitCode).toBeNull();
    const status = JSON.parse((await httpCall(`${adminUrl}/status`)).body) as {
      lastReload: { outcome: string; problems: string[] };
    };
    expect(status.lastReload.outcome).toBe("rejected");
    expect(status.lastReload.problems.length).toBeGreaterThan(0);
  }, 40_000);

  it("without a config file, SIGHUP reloads the environment's configuration and the process lives on", async () => {
    const proc = cli.start(["run"], {
      env: {
        BEARER_PROXY_BASE_URL: emulator().url,
        BEARER_PROXY_CLIENT_ID: "demo-client",
        BEARER_PROXY_CLIENT_SECRET: "demo-secret",
        BEARER_PROXY_CA_FILE: emulator().caFile,
        BEARER_PROXY_LISTEN: "127.0.0.1:0",
        BEARER_PROXY_ADMIN_LISTEN: "127.0.0.1:0",
      },
    });
    const { proxyUrl, adminUrl } = await proc.ports();
    await waitUntilReady(adminUrl);
    // Twice, one after the other (two pending SIGHUPs would merge into one).
    for (const count of [1, 2]) {
      proc.child.kill("SIGHUP");
      await pollUntil(
        async () =>
          logRecords(proc.stdout()).filter((r) => r.msg === "config reloaded").length === count,
        10_000,
        `reload ${count} logged`,
      );
    }
    expect(await statusOf(`${proxyUrl}/echo/x`)).toBe(200);
    expect(proc.child.exitCode).toBeNull();
    expect(proc.child.signalCode).toBeNull();
  }, 40_000);

  it("a ConfigMap-style symlink swap is picked up without a signal", async () => {
    // The kubelet's layout: config.yaml -> ..data/config.yaml, ..data -> ..<timestamp>/.
    const volume = join(dir(), "configmap");
    mkdirSync(join(volume, "..v1"), { recursive: true });
    writeFileSync(join(volume, "..v1", "config.yaml"), emulatorConfigYaml(emulator()));
    symlinkSync("..v1", join(volume, "..data"));
    symlinkSync(join("..data", "config.yaml"), join(volume, "config.yaml"));

    const proc = cli.start(["run", "--config", join(volume, "config.yaml")]);
    const { proxyUrl, adminUrl } = await proc.ports();
    await waitUntilReady(adminUrl);
    expect(await statusOf(`${proxyUrl}/second/echo/x`)).not.toBe(200);

    // The update: a new folder, a new symlink, renamed over `..data` in one step.
    mkdirSync(join(volume, "..v2"));
    writeFileSync(join(volume, "..v2", "config.yaml"), withSecondRoute());
    symlinkSync("..v2", join(volume, "..data_tmp"));
    renameSync(join(volume, "..data_tmp"), join(volume, "..data"));

    await pollUntil(
      async () => (await statusOf(`${proxyUrl}/second/echo/x`)) === 200,
      10_000,
      "the swapped-in route served",
    );
    await proc.waitForOutput(/"trigger":"file","outcome":"applied"/, 5_000);
  }, 40_000);
});
