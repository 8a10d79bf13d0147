import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { useEmulator } from "../helpers/emulator.js";
import { emulatorConfigYaml, freePort, useCliProcesses, useTempDir } from "./helpers.js";

describe.concurrent("bearer-proxy wait", () => {
  const emulator = useEmulator();
  const cli = useCliProcesses({ cleanup: "afterAll" });
  const dir = useTempDir("bp-cli-wait-");

  it("exits 0 once a started proxy is ready", async () => {
    const file = join(dir(), "ready.yaml");
    writeFileSync(file, emulatorConfigYaml(emulator()));
    const proxy = cli.start(["run", "--config", file]);
    const { adminUrl } = await proxy.ports();
    const result = await cli.run(["wait", "--admin", adminUrl, "--timeout", "5s"]);
    expect(result).toMatchObject({ code: 0, stdout: "", stderr: "" });
  });

  it("started before its proxy, keeps polling and exits 0 when the proxy becomes ready", async () => {
    const adminPort = await freePort();
    const adminUrl = `http://127.0.0.1:${adminPort}`;
    const waiting = cli.start(["wait", "--admin", adminUrl, "--timeout", "25s"]);
    const file = join(dir(), "late.yaml");
    writeFileSync(
      file,
      emulatorConfigYaml(emulator()).replace(
        "admin: { host: 127.0.0.1, port: 0 }",
        `admin: { host: 127.0.0.1, port: ${adminPort} }`,
      ),
    );
    // Nothing listens yet: wait must still be waiting when the proxy comes up.
    await new Promise((r) => setTimeout(r, 500));
    expect(waiting.child.exitCode).toBeNull();
    const proxy = cli.start(["run", "--config", file]);
    await proxy.ports();
    const { code } = await waiting.exited;
    expect(code).toBe(0);
    expect(waiting.output()).toBe("");
  });

  it("exits 1 on timeout with a message naming the URL and the last answer", async () => {
    const adminUrl = `http://127.0.0.1:${await freePort()}`;
    const started = performance.now();
    const { code, stdout, stderr } = await cli.run([
      "wait",
      "--admin",
      adminUrl,
      "--timeout",
      "1s",
    ]);
    expect(code).toBe(1);
    expect(stdout).toBe("");
    expect(stderr).toContain(`bearer-proxy wait: ${adminUrl}/readyz not ready after 1s`);
    expect(stderr).toContain("ECONNREFUSED");
    expect(performance.now() - started).toBeGreaterThanOrEqual(1_000);
  });

  it("rejects a bad --timeout", async () => {
    const { code, stderr } = await cli.run(["wait", "--timeout", "soon"]);
    expect(code).not.toBe(0);
    expect(stderr).toContain("soon");
  });
});
