import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { COMMAND_NAMES, REPO_ROOT, useCliProcesses } from "./helpers.js";

const { version } = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as {
  version: string;
};

/** Each command's own flags, as its --help must list them. */
const COMMAND_FLAGS: Record<string, string[]> = {
  run: ["--config", "--base-url", "--client-secret-file", "--listen", "--admin-listen"],
  demo: ["--port", "--admin-port", "--emulator-port"],
  emulate: ["--port", "--host", "--token-lifetime", "--ca-out", "--cert-file", "--key-file"],
  validate: ["--config", "--base-url", "--ca-file"],
  wait: ["--admin", "--timeout"],
  token: ["--upstream", "--config"],
  check: ["--upstream", "--probe-path", "--config"],
  "intercept-ca": ["--config", "--generate"],
};

// This file's tests run at once (describe.concurrent), several CLI starts each: ~20 processes
// together on a loaded two-core machine, so a test gets 90 s, not the suite's 30.
const CONCURRENT_STARTS = { timeout: 90_000 };

describe.concurrent("bearer-proxy arguments: help and version", CONCURRENT_STARTS, () => {
  const cli = useCliProcesses({ cleanup: "afterAll" });

  it("--version prints the package version at top level and after -v", async () => {
    for (const args of [["--version"], ["-v"]]) {
      const result = await cli.run(args);
      expect(result).toMatchObject({ code: 0, stdout: `bearer-proxy ${version}\n`, stderr: "" });
    }
  });

  it("--help and `help` at top level list every command and exit 0", async () => {
    for (const args of [["--help"], ["-h"], ["help"]]) {
      const { code, stdout, stderr } = await cli.run(args);
      expect(code).toBe(0);
      expect(stderr).toBe("");
      expect(stdout).toContain("Usage: bearer-proxy <command> [options]");
      for (const name of COMMAND_NAMES) expect(stdout).toMatch(new RegExp(`^  ${name} +\\S`, "m"));
    }
  });

  for (const name of COMMAND_NAMES) {
    it(`${name} --version and ${name} --help`, async () => {
      const [versionResult, helpResult, helpCommand] = await Promise.all([
        cli.run([name, "--version"]),
        cli.run([name, "--help"]),
        cli.run(["help", name]),
      ]);
      expect(versionResult).toMatchObject({
        code: 0,
        stdout: `bearer-proxy ${version}\n`,
        stderr: "",
      });
      expect(helpResult.code).toBe(0);
      expect(helpResult.stderr).toBe("");
      expect(helpResult.stdout).toMatch(
        new RegExp(`^Usage: bearer-proxy (\\[${name}\\]|${name})`, "m"),
      );
      for (const flag of [...(COMMAND_FLAGS[name] ?? []), "--help", "--version"]) {
        expect(helpResult.stdout).toMatch(new RegExp(`^  ${flag}\\b`, "m"));
      }
      // `help <cmd>` is the same text as `<cmd> --help`.
      expect(helpCommand).toMatchObject({ code: 0, stdout: helpResult.stdout, stderr: "" });
    });
  }
});

describe.concurrent("bearer-proxy arguments: mistakes exit 2", CONCURRENT_STARTS, () => {
  const cli = useCliProcesses({ cleanup: "afterAll" });

  it("an unknown command exits 2, names it and lists the commands on stderr", async () => {
    const { code, stdout, stderr } = await cli.run(["frobnicate", "--config", "x.yaml"]);
    expect(code).toBe(2);
    expect(stdout).toBe("");
    expect(stderr).toContain('unknown command "frobnicate"');
    for (const name of COMMAND_NAMES) expect(stderr).toMatch(new RegExp(`^  ${name} +\\S`, "m"));
  });

  it("`help` with an unknown command exits 2 and names it, not a silent overview", async () => {
    const { code, stderr } = await cli.run(["help", "frobnicate"]);
    expect(stderr).toContain('unknown command "frobnicate"');
    expect(code).toBe(2);
  });

  it("an unknown flag exits 2 and names the flag, for every command and the default one", async () => {
    const cases = [...COMMAND_NAMES.map((name) => [name, "--confg", "x.yaml"]), ["--confg", "x"]];
    const results = await Promise.all(cases.map((args) => cli.run(args)));
    for (const [i, { code, stdout, stderr }] of results.entries()) {
      const command = cases[i]?.[0]?.startsWith("--") ? "run" : cases[i]?.[0];
      expect(code, `${cases[i]?.join(" ")}`).toBe(2);
      expect(stdout).toBe("");
      const takesConfig = ["run", "validate", "token", "check", "intercept-ca"].includes(
        command ?? "",
      );
      expect(stderr).toContain(
        `bearer-proxy ${command}: unknown option --confg${takesConfig ? " (did you mean --config?)" : "\n"}`,
      );
      // Followed by that command's usage, so the right spelling is one glance away.
      expect(stderr).toContain("Options:");
    }
  });

  it("an unknown flag gets a did-you-mean from the command's own flags (issue 32)", async () => {
    const cases: [string[], string][] = [
      [
        ["demo", "--porr", "18080"],
        "bearer-proxy demo: unknown option --porr (did you mean --port?)",
      ],
      [
        ["demo", "--emulator-prot", "0"],
        "bearer-proxy demo: unknown option --emulator-prot (did you mean --emulator-port?)",
      ],
      [
        ["check", "--probe-pth", "/x"],
        "bearer-proxy check: unknown option --probe-pth (did you mean --probe-path?)",
      ],
      [
        ["wait", "--timout", "3s"],
        "bearer-proxy wait: unknown option --timout (did you mean --timeout?)",
      ],
      [
        ["run", "--client-secret-flie", "s"],
        "bearer-proxy run: unknown option --client-secret-flie (did you mean --client-secret-file?)",
      ],
      // Another command's flag: say whose it is.
      [
        ["demo", "--config", "x.yaml"],
        "bearer-proxy demo: unknown option --config (an option of run, validate, token, check and intercept-ca, not of demo)",
      ],
      [
        ["emulate", "--upstream", "x"],
        "bearer-proxy emulate: unknown option --upstream (an option of token and check, not of emulate)",
      ],
    ];
    const results = await Promise.all(cases.map(([args]) => cli.run(args)));
    for (const [i, { code, stdout, stderr }] of results.entries()) {
      expect(code, cases[i]?.[0].join(" ")).toBe(2);
      expect(stdout).toBe("");
      expect(stderr.split("\n")[0]).toBe(cases[i]?.[1]);
      // Node's parser text ("To specify a positional argument starting with a '-'…") is gone.
      expect(stderr).not.toContain("positional argument");
    }
  });

  it("a flag that needs a value, given none, exits 2 and names it", async () => {
    const { code, stderr } = await cli.run(["validate", "--config"]);
    expect(code).toBe(2);
    expect(stderr).toContain("--config");
  });

  it("a positional argument exits 2 and names it", async () => {
    const results = await Promise.all([
      cli.run(["validate", "config/sidecar.yaml"]),
      cli.run(["run", "--listen", "127.0.0.1:0", "extra"]),
    ]);
    expect(results[0]).toMatchObject({ code: 2, stdout: "" });
    expect(results[0]?.stderr).toContain('unexpected argument "config/sidecar.yaml"');
    expect(results[1]).toMatchObject({ code: 2, stdout: "" });
    expect(results[1]?.stderr).toContain('unexpected argument "extra"');
  });
});
