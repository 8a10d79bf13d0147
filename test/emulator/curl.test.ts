import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { SCRIPTING_PREVIEW_HEADER } from "../../src/config/api-versions.js";
import { describeEmulator } from "../../src/emulator/emulator.js";
import { bearerGetArgs, curl, tokenRequestArgs } from "../helpers/curl.js";
import { useEmulator } from "../helpers/emulator.js";

const run = promisify(execFile);

describe("real clients: curl --cacert", () => {
  const emulator = useEmulator();

  it("gets a default token with a form body and reads a spreadsheet", async () => {
    const { url, caFile } = emulator();
    const token = await curl(tokenRequestArgs(url, caFile));
    expect(token.code).toBe(0);
    const { access_token } = JSON.parse(token.stdout);
    const sheet = await curl(
      bearerGetArgs(`${url}/platform/v1/spreadsheets/abc`, caFile, access_token),
    );
    expect(JSON.parse(sheet.stdout)).toMatchObject({ id: "abc" });
  });

  it("gets a preview token with HTTP Basic (curl -u) and a JSON body and lists scripts", async () => {
    const { url, caFile } = emulator();
    const token = await curl([
      "--cacert",
      caFile,
      "-u",
      "demo-client:demo-secret",
      "-X",
      "POST",
      `${url}/oauth2/token`,
      "-H",
      `X-Version: ${SCRIPTING_PREVIEW_HEADER}`,
      "-H",
      "Content-Type: application/json",
      "--data",
      '{"grant_type":"client_credentials"}',
    ]);
    const { access_token } = JSON.parse(token.stdout);
    const scripts = await curl([
      "--cacert",
      caFile,
      "-H",
      `Authorization: Bearer ${access_token}`,
      "-H",
      `X-Version: ${SCRIPTING_PREVIEW_HEADER}`,
      `${url}/scripts`,
    ]);
    expect(JSON.parse(scripts.stdout).scripts.length).toBeGreaterThan(0);
  });

  it("fails verification without the CA (curl exit 60)", async () => {
    expect((await curl([`${emulator().url}/scripts`])).code).toBe(60);
  });

  it("prints curl commands in describeEmulator that work when pasted into a shell", async () => {
    const text = describeEmulator(emulator());
    expect(text).toContain(emulator().url);
    expect(text).toContain(emulator().caFile);
    expect(text).toContain("demo-secret");
    const script = text
      .split("\n")
      .filter(
        (line) =>
          line.startsWith("  ") &&
          !line.trimStart().startsWith("#") &&
          !/^ {2}(CA|demo|clients)/.test(line),
      )
      .join("\n");
    const { stdout } = await run("bash", ["-euo", "pipefail", "-c", script], { timeout: 10_000 });
    expect(stdout).toContain('"title":"Spreadsheet demo"');
    expect(stdout).toContain('"scripts":[');
  });

  it("does not print a secret for clients other than the demo one", async () => {
    emulator().setClients([{ clientId: "prod", clientSecret: "super-secret" }]);
    const text = describeEmulator(emulator());
    expect(text).not.toContain("super-secret");
    expect(text).not.toContain("demo-secret");
    emulator().setClients([{ clientId: "demo-client", clientSecret: "demo-secret" }]);
  });
});
