import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import {
  httpCall,
  pollUntil,
  REPO_ROOT,
  useBusyPort,
  useCliProcesses,
  waitUntilReady,
} from "./helpers.js";

/** The Quickstart's curl lines (the README shows the default ports 8080 and 9901). */
function readmeCurlLines(): string[] {
  const readme = readFileSync(join(REPO_ROOT, "README.md"), "utf8");
  const quickstart = readme.slice(
    readme.indexOf("## Quickstart"),
    readme.indexOf("\n## ", readme.indexOf("## Quickstart") + 1),
  );
  return quickstart
    .split("\n")
    .filter((line) => line.startsWith("curl "))
    .map((line) => line.replace(/\s+#.*$/, "").trim());
}

function sh(script: string): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) => {
    execFile(
      "sh",
      ["-c", script],
      { env: { PATH: process.env.PATH ?? "/usr/bin:/bin" }, timeout: 15_000 },
      (error, stdout) => {
        resolve({ code: error ? (typeof error.code === "number" ? error.code : -1) : 0, stdout });
      },
    );
  });
}

describe("bearer-proxy demo", () => {
  const cli = useCliProcesses();

  it("prints working curl lines (the README's), and one Ctrl-C under npm (2 SIGINTs) exits 0", async () => {
    const proc = cli.start(["demo", "--port", "0", "--admin-port", "0", "--emulator-port", "0"]);
    await proc.waitForOutput(/^Stop with Ctrl-C\.$/m);
    const { proxyUrl, adminUrl } = await proc.ports();
    const [, caFile] = await proc.waitForOutput(/ CA: (\S+)$/m);
    const printed = proc.stdout();

    // The README's lines, with the ports this demo got, are among the printed ones.
    const readmeLines = readmeCurlLines();
    expect(readmeLines).toEqual(
      expect.arrayContaining([
        "curl http://127.0.0.1:8080/platform/v1/spreadsheets/demo",
        "curl http://127.0.0.1:8080/scripts",
      ]),
    );
    const proxyPort = new URL(proxyUrl).port;
    const adminPort = new URL(adminUrl).port;
    const expected = readmeLines.map((line) =>
      line.replace(":8080/", `:${proxyPort}/`).replace(":9901/", `:${adminPort}/`),
    );
    const printedCurl = printed
      .split("\n")
      .filter((l) => l.startsWith("  curl "))
      .map((l) => l.replace(/\s+#.*$/, "").trim());
    for (const line of expected) expect(printedCurl).toContain(line);

    // Run the two API lines as printed: the emulator's JSON comes back through the proxy.
    await waitUntilReady(adminUrl);
    const sheetLine = printedCurl.find((l) => l.endsWith("/platform/v1/spreadsheets/demo"));
    const scriptsLine = printedCurl.find((l) => l.endsWith("/scripts"));
    if (!sheetLine || !scriptsLine) throw new Error(`curl lines missing from:\n${printed}`);
    const [sheet, scripts] = await Promise.all([sh(`${sheetLine} -sS`), sh(`${scriptsLine} -sS`)]);
    expect(sheet.code).toBe(0);
    expect(JSON.parse(sheet.stdout)).toMatchObject({ id: "demo", title: "Spreadsheet demo" });
    expect(scripts.code).toBe(0);
    expect(JSON.parse(scripts.stdout)).toMatchObject({
      scripts: expect.arrayContaining([expect.objectContaining({ id: "script-1" })]),
    });

    // An upload in flight, its body half sent: the demo's shutdown (no drain delay) waits for
    // it, so the second signal below lands while the first one's shutdown is still running —
    // as npm's copy does. Without it the demo stops in ~6 ms and exits ~15 ms later, and a
    // second signal delayed into that window (a loaded machine stretches a 5 ms sleep) meets
    // the default disposition Node restores while it exits: death by SIGINT.
    const upload = connect(Number(proxyPort), "127.0.0.1");
    let uploadAnswer = "";
    upload.setEncoding("utf8").on("data", (chunk: string) => {
      uploadAnswer += chunk;
    });
    await new Promise<void>((resolve) => upload.once("connect", resolve));
    upload.write(
      `POST /echo/anything HTTP/1.1\r\nHost: 127.0.0.1:${proxyPort}\r\nContent-Length: 10\r\nConnection: close\r\n\r\n01234`,
    );
    // In flight once the proxy has read its headers (before, shutdown would close it as idle).
    await pollUntil(
      async () =>
        /^bearer_proxy_requests_in_flight\{[^}]*\} 1$/m.test(
          (await httpCall(`${adminUrl}/metrics`)).body,
        ),
      5_000,
      "the upload in flight",
    );

    // Ctrl-C in a terminal under npm start: SIGINT from the terminal, and again from npm.
    const stopAtMs = performance.now();
    proc.child.kill("SIGINT");
    await sleep(5);
    proc.child.kill("SIGINT");
    // The first signal's shutdown is under way: the proxy has begun draining.
    await proc.waitForOutput(/shutting down: readiness now fails/);
    upload.write("56789");
    const { code, signal, atMs } = await proc.exited;
    expect(uploadAnswer, proc.output().slice(-3000)).toMatch(/^HTTP\/1\.1 200 /);
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    expect(proc.output()).not.toContain("second signal");
    expect(proc.output()).toContain('"msg":"stopped"');
    // drainDelay 0 in the demo: it stops promptly, and takes its emulator (and CA file) along.
    expect(atMs - stopAtMs).toBeLessThan(5_000);
    if (caFile) expect(existsSync(caFile)).toBe(false);
  });

  it("refuses a port that is not a number", async () => {
    const { code, stderr } = await cli.run(["demo", "--port", "eighty"]);
    expect(code).toBe(1);
    expect(stderr).toContain('--port: expected a port number, found "eighty"');
  });
});

describe.concurrent("bearer-proxy demo on a taken port", () => {
  const cli = useCliProcesses({ cleanup: "afterAll" });
  const busyPort = useBusyPort();

  const listeners = {
    "--port": "proxy listener",
    "--admin-port": "admin listener",
    "--emulator-port": "emulator",
  };
  for (const [flag, listener] of Object.entries(listeners)) {
    it(`exits 1 at once when ${flag} is taken, naming the ${listener}, the address and the flag (its emulator must not hold it up)`, async () => {
      const ports = { "--port": "0", "--admin-port": "0", "--emulator-port": "0" };
      const args = Object.entries({ ...ports, [flag]: String(busyPort()) }).flat();
      // Before the fix this hung for ever: the emulator it had started kept the process alive.
      // (20 s: four demos start at once here, on a loaded machine.)
      const { code, stderr } = await cli.run(["demo", ...args], { timeoutMs: 20_000 });
      expect(code).toBe(1);
      // Issue 32: which listener, which address, and the flag that moves it.
      expect(stderr).toBe(
        `bearer-proxy: cannot start: the ${listener} cannot listen on 127.0.0.1:${busyPort()}: the address is already in use (another process listens there); move it with ${flag} N (0 picks a free port)\n`,
      );
    });
  }

  it("under npm start, the flag goes after --", async () => {
    const { code, stderr } = await cli.run(
      ["demo", "--port", "0", "--admin-port", "0", "--emulator-port", String(busyPort())],
      { timeoutMs: 20_000, env: { npm_lifecycle_event: "start" } },
    );
    expect(code).toBe(1);
    expect(stderr).toContain(
      "; move it with npm start -- --emulator-port N (0 picks a free port)\n",
    );
  });
});
