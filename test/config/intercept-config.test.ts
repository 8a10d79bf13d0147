/**
 * `intercept` and `upstreams[].intercept` at load (and so in `validate` and at start): the CA is
 * checked as the loader checks it, each problem on its field; an intercepted upstream needs the
 * CA and an https:// base URL; a CONNECT authority names at most one upstream.
 */
import { describe, expect, it } from "vitest";
import { loadConfigWithWarnings } from "../../src/config/load.js";
import { type CaFiles, useCaFiles } from "../helpers/intercept-ca-files.js";
import { issuesOfText, yaml } from "./load-helpers.js";

const files = useCaFiles("bp-config-intercept-");

function config(
  ca: Pick<CaFiles, "caCertFile" | "caKeyFile"> | undefined,
  upstreams: string,
): string {
  const block = ca
    ? `intercept:\n  caCertFile: ${ca.caCertFile}\n  caKeyFile: ${ca.caKeyFile}\n`
    : "";
  return `${block}upstreams:\n${upstreams}`;
}

function upstream(name: string, baseUrl: string, extra = "    intercept: true\n"): string {
  return `  - name: ${name}\n    baseUrl: ${baseUrl}\n    clientId: id\n    clientSecret: secret\n${extra}`;
}

const shown = async (text: string) =>
  (await issuesOfText(text)).map((i) => `${i.path}: ${i.message}`);

describe("intercept in the configuration", () => {
  it("loads the CA paths (absolute) and each upstream's intercept (default false)", async () => {
    const ca = await files.writeCa("ec-p256");
    const { config: loaded, warnings } = await loadConfigWithWarnings({
      configText: config(
        { caCertFile: "intercept-ca.pem", caKeyFile: "./intercept-ca-key.pem" },
        upstream("sheets", "https://api.example.com") +
          upstream("files", "https://files.example.com", "    match: { pathPrefix: /files }\n"),
      ),
      // Relative paths are read from the config file's folder, like every other file.
      configFile: `${ca.dir}/bearer-proxy.yaml`,
      env: {},
    });
    expect(loaded.intercept).toEqual({ caCertFile: ca.caCertFile, caKeyFile: ca.caKeyFile });
    expect(loaded.upstreams.map((u) => [u.name, u.intercept])).toEqual([
      ["sheets", true],
      ["files", false],
    ]);
    expect(warnings).toEqual([]);
  });

  it("has intercept off without the block", async () => {
    const { config: loaded } = await loadConfigWithWarnings({
      configText: config(undefined, upstream("sheets", "https://api.example.com", "")),
      env: {},
    });
    expect(loaded.intercept).toBeUndefined();
    expect(loaded.upstreams[0]?.intercept).toBe(false);
  });

  it("refuses intercept: true without the intercept block", async () => {
    expect(await shown(config(undefined, upstream("sheets", "https://api.example.com")))).toEqual([
      "upstreams[0] (sheets).intercept: needs the top-level intercept block (caCertFile and caKeyFile): the CA that signs this host's certificate (line 6)",
    ]);
  });

  it("refuses a CA key group or others can read, on intercept.caKeyFile, naming the file and chmod 600", async () => {
    const ca = await files.writeCa("ec-p256", { keyMode: 0o640 });
    expect(await shown(config(ca, upstream("sheets", "https://api.example.com")))).toEqual([
      `intercept.caKeyFile: expected a key file only its owner can read, found mode 0640 on ${ca.caKeyFile} (group or others can read it); run \`chmod 600 ${ca.caKeyFile}\` (line 3)`,
    ]);
  });

  it("refuses a CA certificate that is not a CA, on intercept.caCertFile, naming the file", async () => {
    const ca = await files.writeCa("not-a-ca");
    const issues = await shown(config(ca, upstream("sheets", "https://api.example.com")));
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatch(
      /^intercept\.caCertFile: expected a CA certificate \(basicConstraints CA:TRUE\), found one for "CN=test interception CA \(not-a-ca\)" that is not a CA in /,
    );
    expect(issues[0]).toContain(ca.caCertFile);
    expect(issues[0]).toMatch(/\(line 2\)$/);
  });

  it.each([
    ["rsa-1024", "found an RSA key of 1024 bits"],
    ["ec-p384", "found an EC key on P-384"],
    ["encrypted-key", "found an encrypted one"],
    ["mismatched-key", "found another key"],
  ] as const)("refuses a %s CA key on intercept.caKeyFile", async (variant, found) => {
    const ca = await files.writeCa(variant);
    const issues = await shown(config(ca, upstream("sheets", "https://api.example.com")));
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatch(/^intercept\.caKeyFile: expected /);
    expect(issues[0]).toContain(found);
    expect(issues[0]).toContain(ca.caKeyFile);
  });

  it("refuses the block without one of its files", async () => {
    const issues = await shown(
      yaml`
        intercept:
          caCertFile: /etc/bearer-proxy/intercept-ca.pem
        upstreams:
      ` + upstream("sheets", "https://api.example.com"),
    );
    expect(issues).toEqual(["intercept.caKeyFile: required, but missing (line 1)"]);
  });

  it("refuses two intercepted upstreams with one authority (host case-insensitive, 443 implied)", async () => {
    const ca = await files.writeCa("ec-p256");
    // Each with a plain route of its own: the plain listener's rules still apply to them.
    const routed = (prefix: string) =>
      `    intercept: true\n    match: { pathPrefix: ${prefix} }\n`;
    const issues = await shown(
      config(
        ca,
        upstream("sheets", "https://api.example.com/platform", routed("/platform")) +
          upstream("scripts", "https://API.example.com:443/scripts", routed("/scripts")) +
          // Another port is another authority.
          upstream("admin", "https://api.example.com:8443", routed("/admin")),
      ),
    );
    expect(issues).toEqual([
      "upstreams[1] (scripts).intercept: expected one intercepted upstream per authority, found api.example.com:443 again (first: upstreams[0] (sheets)); a CONNECT is routed by its authority alone, so set intercept on one of them (line 15)",
    ]);
  });

  it("lets a plain upstream share the authority of an intercepted one", async () => {
    const ca = await files.writeCa("ec-p256");
    const { config: loaded } = await loadConfigWithWarnings({
      configText: config(
        ca,
        upstream("sheets", "https://api.example.com") +
          upstream("scripts", "https://api.example.com", "    match: { pathPrefix: /scripts }\n"),
      ),
      env: {},
    });
    expect(loaded.upstreams.map((u) => u.intercept)).toEqual([true, false]);
  });

  it("refuses intercept on a plain http:// upstream", async () => {
    const ca = await files.writeCa("ec-p256");
    const issues = await shown(
      config(
        ca,
        upstream(
          "local",
          "http://127.0.0.1:9000",
          "    allowInsecureHttp: true\n    intercept: true\n",
        ),
      ),
    );
    expect(issues).toEqual([
      "upstreams[0] (local).intercept: expected an https:// baseUrl (clients reach an intercepted host with https:// through CONNECT), found http:// (line 10)",
    ]);
  });

  it("warns that a base URL's path does not bound what the tunnel reaches", async () => {
    const ca = await files.writeCa("ec-p256");
    const { warnings } = await loadConfigWithWarnings({
      configText: config(ca, upstream("sheets", "https://api.example.com/platform/v1/")),
      env: {},
    });
    expect(warnings).toEqual([
      "upstreams[0] (sheets).intercept: requests inside the tunnel keep the path the client sent: the token goes with every path of api.example.com:443, not only under /platform/v1 (line 9)",
    ]);
  });

  it("warns about a CA that strict verifiers (Python 3.13+) refuse, naming what it lacks", async () => {
    // selfsigned's CA here has basicConstraints and keyUsage, but no subjectKeyIdentifier.
    const ca = await files.writeCa("rsa-2048");
    const { warnings } = await loadConfigWithWarnings({
      configText: config(ca, upstream("sheets", "https://api.example.com")),
      env: {},
    });
    expect(warnings).toEqual([
      `intercept.caCertFile: the CA certificate in ${ca.caCertFile} has no subjectKeyIdentifier: clients that verify strictly (OpenSSL's X509_STRICT, Python 3.13 and later by default) refuse every certificate it signs; \`bearer-proxy intercept-ca --generate\` and \`openssl req -x509\` make CAs with all three (line 2)`,
    ]);
  });

  it("warns when the CA is configured but no upstream is intercepted", async () => {
    const ca = await files.writeCa("ec-p256");
    const { warnings } = await loadConfigWithWarnings({
      configText: config(ca, upstream("sheets", "https://api.example.com", "")),
      env: {},
    });
    expect(warnings).toEqual([
      "intercept: no upstream has intercept: true, so every CONNECT is refused (403 host_not_allowed) (line 1)",
    ]);
  });
});
