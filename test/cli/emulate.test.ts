import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { bearerGetArgs, curl, curlWithStatus, exec, tokenRequestArgs } from "../helpers/curl.js";
import { JWT, useBusyPort, useCliProcesses } from "./helpers.js";

/** The shell lines `emulate` prints under a heading, continuation lines joined back up. */
function printedBlock(stdout: string, heading: string): string {
  const lines = stdout.split("\n");
  const start = lines.findIndex((l) => l.includes(heading));
  const block: string[] = [];
  for (const line of lines.slice(start + 1)) {
    if (line.trim() === "") break;
    block.push(line);
  }
  return block.join("\n");
}

describe("bearer-proxy emulate, driven with curl", () => {
  const cli = useCliProcesses();
  const busyPort = useBusyPort();

  it("listens on the port 0 picked, prints URL and CA, and behaves for curl; SIGTERM exits 0", async () => {
    const proc = cli.start(["emulate", "--port", "0"]);
    const [, url] = await proc.waitForOutput(
      /^upstream emulator listening on (https:\/\/127\.0\.0\.1:\d+)$/m,
    );
    const [, caFile] = await proc.waitForOutput(/^ {2}CA certificate: (\S+)$/m);
    if (!url || !caFile) throw new Error("emulate printed no URL or CA");
    expect(url).not.toMatch(/:0$/);
    expect(existsSync(caFile)).toBe(true);

    const token = await curl(tokenRequestArgs(url, caFile));
    expect(token.code).toBe(0);
    const grant = JSON.parse(token.stdout) as Record<string, unknown>;
    expect(grant).toMatchObject({ token_type: "Bearer", expires_in: 599 });
    expect(grant.access_token).toMatch(JWT);

    const api = await curlWithStatus(
      bearerGetArgs(`${url}/platform/v1/spreadsheets/x`, caFile, String(grant.access_token)),
    );
    expect(api.code).toBe(0);
    expect(api.status).toBe("200");
    expect(JSON.parse(api.body)).toMatchObject({ id: "x", title: "Spreadsheet x" });

    // A wrong secret is refused the RFC 6749 way.
    const refused = await curlWithStatus(tokenRequestArgs(url, caFile, "nope"));
    expect(refused.status).toBe("401");
    expect(JSON.parse(refused.body)).toMatchObject({ error: "invalid_client" });

    // Without the CA, curl does not trust the emulator: exit 60 (peer certificate not verified).
    const untrusted = await curl([`${url}/platform/v1/spreadsheets/x`]);
    expect(untrusted.code).toBe(60);

    // The curl lines it printed work as printed, for both API versions.
    const printed = proc.stdout();
    const defaultLines = printedBlock(printed, "# default API version");
    const previewLines = printedBlock(printed, "# scripting preview");
    expect(defaultLines).toContain("curl");
    const [defaultRun, previewRun] = await Promise.all([
      exec("sh", ["-c", defaultLines]),
      exec("sh", ["-c", previewLines]),
    ]);
    expect(defaultRun.code).toBe(0);
    expect(JSON.parse(defaultRun.stdout)).toMatchObject({ id: "demo" });
    expect(previewRun.code).toBe(0);
    expect(JSON.parse(previewRun.stdout)).toMatchObject({ scripts: expect.any(Array) });

    proc.child.kill("SIGTERM");
    const { code, signal } = await proc.exited;
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    // Its generated CA lived in a temp folder that it removed.
    expect(existsSync(caFile)).toBe(false);
  });

  it("on a taken port, names the emulator, the address and the flags that move it", async () => {
    const { code, stderr } = await cli.run(["emulate", "--port", String(busyPort())]);
    expect(code).toBe(1);
    expect(stderr).toBe(
      `bearer-proxy: cannot start: the emulator cannot listen on 127.0.0.1:${busyPort()}: the address is already in use (another process listens there); move it with --port N (0 picks a free port) or --host\n`,
    );
  });

  it("rejects a port that is not a number, naming the flag", async () => {
    const { code, stderr } = await cli.run(["emulate", "--port", "http"]);
    expect(code).toBe(1);
    expect(stderr).toContain('--port: expected a whole number, found "http"');
  });
});
