/**
 * `bearer-proxy intercept-ca`, run as an operator runs it: the configured CA's certificate alone
 * on stdout (ready for `> ca.pem` and `--cacert`), the hint for each tool on stderr; and
 * `--generate DIR` making a CA that `validate` then accepts.
 */
import { X509Certificate } from "node:crypto";
import { statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { useCaFiles } from "../helpers/intercept-ca-files.js";
import { useCliProcesses, useTempDir } from "./helpers.js";

const UPSTREAM = `upstreams:
  - name: sheets
    baseUrl: https://api.example.com
    clientId: demo-client
    clientSecret: demo-secret
    intercept: true
`;

const TOOLS = [
  "curl --cacert FILE",
  "wget --ca-certificate=FILE",
  "git -c http.sslCAInfo=FILE",
  "SSL_CERT_FILE=FILE",
  "REQUESTS_CA_BUNDLE=FILE",
  "NODE_EXTRA_CA_CERTS=FILE",
  "keytool -importcert",
];

describe.concurrent("bearer-proxy intercept-ca", () => {
  const cli = useCliProcesses({ cleanup: "afterAll" });
  const dir = useTempDir("bp-cli-intercept-");
  const cas = useCaFiles("bp-cli-intercept-ca-");

  it("prints the configured CA certificate on stdout and how to trust it on stderr", async () => {
    const ca = await cas.writeCa("ec-p256");
    const file = join(ca.dir, "bearer-proxy.yaml");
    writeFileSync(
      file,
      `intercept:\n  caCertFile: intercept-ca.pem\n  caKeyFile: intercept-ca-key.pem\n${UPSTREAM}`,
    );
    const { code, stdout, stderr } = await cli.run(["intercept-ca", "--config", file]);
    expect(code).toBe(0);
    expect(stdout).toBe(`${ca.certPem.trim()}\n`);
    const printed = new X509Certificate(stdout);
    expect(stderr).toContain(`SHA-256 ${printed.fingerprint256}`);
    expect(stderr).toContain(`trust ${ca.caCertFile}: `);
    for (const tool of TOOLS) expect(stderr).toContain(tool);
    // The key is nowhere.
    const keyLine = ca.keyPem.split("\n")[1]!;
    expect(stdout + stderr).not.toContain(keyLine);
  });

  it("says what is missing when the configuration has no intercept block", async () => {
    const file = join(dir(), "no-intercept.yaml");
    writeFileSync(file, UPSTREAM.replace("    intercept: true\n", ""));
    const { code, stdout, stderr } = await cli.run(["intercept-ca", "--config", file]);
    expect(code).toBe(1);
    expect(stdout).toBe("");
    expect(stderr).toContain("the configuration has no intercept block");
    expect(stderr).toContain("bearer-proxy intercept-ca --generate DIR");
  });

  it("refuses like validate when the CA key is readable by others, naming the field and file", async () => {
    const ca = await cas.writeCa("ec-p256", { keyMode: 0o644 });
    const file = join(ca.dir, "bearer-proxy.yaml");
    writeFileSync(
      file,
      `intercept:\n  caCertFile: intercept-ca.pem\n  caKeyFile: intercept-ca-key.pem\n${UPSTREAM}`,
    );
    const commands = ["intercept-ca", "validate"];
    const results = await Promise.all(commands.map((c) => cli.run([c, "--config", file])));
    for (const [i, { code, stdout, stderr }] of results.entries()) {
      const command = commands[i];
      expect(code, command).toBe(1);
      expect(stdout, command).toBe("");
      expect(stderr, command).toContain(
        `intercept.caKeyFile: expected a key file only its owner can read, found mode 0644 on ${ca.caKeyFile} (group or others can read it); run \`chmod 600 ${ca.caKeyFile}\` (line 3)`,
      );
    }
  });

  it("--generate DIR writes a CA (key 0600) that validate and the command accept", async () => {
    const target = join(dir(), "made", "ca");
    const made = await cli.run(["intercept-ca", "--generate", target]);
    expect(made.code).toBe(0);
    const certFile = join(target, "intercept-ca.pem");
    const keyFile = join(target, "intercept-ca-key.pem");
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(statSync(target).mode & 0o777).toBe(0o700);
    const cert = new X509Certificate(made.stdout);
    expect(cert.ca).toBe(true);
    expect(made.stderr).toContain(`caCertFile: ${certFile}`);
    expect(made.stderr).toContain(`caKeyFile: ${keyFile}`);
    expect(made.stderr).toContain("curl --cacert FILE");

    const file = join(dir(), "generated.yaml");
    writeFileSync(
      file,
      `intercept:\n  caCertFile: ${certFile}\n  caKeyFile: ${keyFile}\n${UPSTREAM}`,
    );
    const [validated, printed, again] = await Promise.all([
      cli.run(["validate", "--config", file]),
      cli.run(["intercept-ca", "--config", file]),
      // Never over a CA clients may already trust.
      cli.run(["intercept-ca", "--generate", target]),
    ]);
    expect(validated).toMatchObject({ code: 0, stderr: "" });
    expect(printed).toMatchObject({ code: 0, stdout: made.stdout });
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`${certFile} exists: refusing to overwrite`);
    expect(again.stdout).toBe("");
  }, 90_000); // two rounds of CLI processes: seconds each on a loaded machine

  it("--generate reads no configuration, and says so when given one", async () => {
    const { code, stderr } = await cli.run([
      "intercept-ca",
      "--generate",
      join(dir(), "unused"),
      "--config",
      "x.yaml",
    ]);
    expect(code).toBe(2);
    expect(stderr).toContain("--generate makes a new CA and reads no configuration");
  });
});
