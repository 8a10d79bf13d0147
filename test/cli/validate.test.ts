import { readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT, useCliProcesses, useTempDir } from "./helpers.js";

const EXAMPLES = readdirSync(join(REPO_ROOT, "config"))
  .filter((name) => name.endsWith(".yaml"))
  .sort();

/** Three mistakes, each in a different place; line numbers matter for the report. */
const THREE_MISTAKES = `listen:
  host: 127.0.0.1
  port: 99999
upstreams:
  - name: Sheets
    baseUrl: https://api.example.com
    clientId: demo-client
    clientSecret: demo-secret
    tokenRequestFormat: xml
`;

const VALID_ONE_UPSTREAM = `upstreams:
  - name: sheets
    baseUrl: https://api.example.com
    clientId: demo-client
    clientSecret: demo-secret
`;

describe.concurrent("bearer-proxy validate", () => {
  const cli = useCliProcesses({ cleanup: "afterAll" });
  const dir = useTempDir("bp-cli-validate-");

  it("has example files to check", () => {
    expect(EXAMPLES).toEqual(expect.arrayContaining(["proxy.example.yaml", "sidecar.yaml"]));
  });

  for (const name of EXAMPLES) {
    it(`passes config/${name} with an empty environment`, async () => {
      // useCliProcesses gives the child PATH and nothing else: every ${VAR:-default} is used.
      const { code, stdout, stderr } = await cli.run(["validate", "--config", `config/${name}`]);
      expect(stderr).toBe("");
      expect(stdout).toMatch(
        new RegExp(`^config/${name.replace(".", "\\.")} is valid: \\d+ upstream`),
      );
      expect(code).toBe(0);
    });
  }

  it("prints all three mistakes with their paths and lines, and exits 1", async () => {
    const file = join(dir(), "three-mistakes.yaml");
    writeFileSync(file, THREE_MISTAKES);
    const { code, stdout, stderr } = await cli.run(["validate", "--config", file]);
    expect(code).toBe(1);
    expect(stdout).toBe("");
    expect(stderr).toContain(`invalid configuration in ${file} (3 problems)`);
    const problems = stderr.split("\n").filter((line) => line.startsWith("  "));
    expect(problems).toHaveLength(3);
    expect(problems[0]).toMatch(
      /^ {2}listen\.port: expected at most 65535, found 99999 \(line 3\)$/,
    );
    expect(problems[1]).toMatch(
      /^ {2}upstreams\[0\] \(Sheets\)\.name: expected .*found "Sheets" \(line 5\)$/,
    );
    expect(problems[2]).toMatch(
      /^ {2}upstreams\[0\] \(Sheets\)\.tokenRequestFormat: expected one of "form", "json", found "xml" \(line 9\)$/,
    );
  });

  it("prints a warning for an unknown BEARER_PROXY_ variable and still passes", async () => {
    const file = join(dir(), "valid.yaml");
    writeFileSync(file, VALID_ONE_UPSTREAM);
    const { code, stdout, stderr } = await cli.run(["validate", "--config", file], {
      env: { BEARER_PROXY_CLIENT_SECRT: "oops" },
    });
    expect(code).toBe(0);
    expect(stdout).toContain("is valid: 1 upstream(s) (sheets)");
    expect(stderr).toContain("warning: env BEARER_PROXY_CLIENT_SECRT: unknown variable");
    expect(stderr).toContain('did you mean "BEARER_PROXY_CLIENT_SECRET"?');
    // The value of a misspelt secret variable is not echoed back.
    expect(stderr).not.toContain("oops");
  });

  it("prints the warnings next to the errors when the file is invalid too", async () => {
    const file = join(dir(), "three-mistakes-warned.yaml");
    writeFileSync(file, THREE_MISTAKES);
    const { code, stderr } = await cli.run(["validate", "--config", file], {
      env: { BEARER_PROXY_CLIENT_SECRT: "oops" },
    });
    expect(code).toBe(1);
    expect(stderr).toContain("(3 problems)");
    expect(stderr).toContain("BEARER_PROXY_CLIENT_SECRT: unknown variable");
  });

  it("applies flags over env over file, and reports what it validated", async () => {
    const file = join(dir(), "valid-overridden.yaml");
    writeFileSync(file, VALID_ONE_UPSTREAM);
    const { code, stdout } = await cli.run(
      ["validate", "--config", file, "--listen", "127.0.0.1:7001"],
      {
        env: { BEARER_PROXY_LISTEN: "127.0.0.1:7002", BEARER_PROXY_ADMIN_LISTEN: "127.0.0.1:7003" },
      },
    );
    expect(code).toBe(0);
    expect(stdout).toContain("proxy on 127.0.0.1:7001, admin on 127.0.0.1:7003");
  });

  it("reads the file named by BEARER_PROXY_CONFIG when there is no --config", async () => {
    const { code, stdout } = await cli.run(["validate"], {
      env: { BEARER_PROXY_CONFIG: "config/sidecar.yaml" },
    });
    expect(code).toBe(0);
    expect(stdout).toContain("is valid: 1 upstream(s) (api)");
  });

  it("names a config file that does not exist", async () => {
    const { code, stderr } = await cli.run(["validate", "--config", "no/such/file.yaml"]);
    expect(code).toBe(1);
    expect(stderr).toMatch(/cannot read .*no\/such\/file\.yaml: no such file/);
  });
});
