/**
 * The interception CA loader (config/intercept-ca.ts): a usable CA loads with its public facts; each way
 * a CA can be unusable is refused with a message naming the file, on the right field.
 */
import { chmodSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { loadInterceptCa, readInterceptCa } from "../../src/config/intercept-ca.js";
import { BearerProxyError } from "../../src/errors.js";
import { type CaFiles, useCaFiles } from "../helpers/intercept-ca-files.js";

const files = useCaFiles();

async function problemsOf(ca: Pick<CaFiles, "caCertFile" | "caKeyFile">) {
  const result = await readInterceptCa(ca);
  expect(result.problems, "expected the CA to be refused").toBeDefined();
  return result.problems ?? [];
}

describe("the interception CA loader", () => {
  it("loads an EC P-256 CA (the --generate kind) with its public facts", async () => {
    const written = await files.writeCa("ec-p256");
    const ca = await loadInterceptCa(written);
    expect(ca.key).toBe("EC P-256");
    expect(ca.keyKind).toBe("ec-p256");
    expect(ca.subject).toBe("CN=test interception CA (ec-p256)");
    expect(ca.fingerprintSha256).toMatch(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
    expect(ca.notAfter.getTime()).toBeGreaterThan(Date.now() + 700 * 24 * 3600_000);
    expect(ca.certFile).toBe(written.caCertFile);
    expect(ca.chainPem).toBe(`${written.certPem.trim()}\n`);
  });

  it("loads an RSA 2048 CA", async () => {
    const ca = await loadInterceptCa(await files.writeCa("rsa-2048"));
    expect([ca.key, ca.keyKind]).toEqual(["RSA 2048", "rsa"]);
  });

  it("keeps the private key out of JSON and out of the object's enumerable keys", async () => {
    const written = await files.writeCa("ec-p256");
    const ca = await loadInterceptCa(written);
    const body = written.keyPem.split("\n").filter((l) => l !== "" && !l.startsWith("-----"));
    const json = JSON.stringify(ca);
    for (const line of body) expect(json).not.toContain(line);
    expect(Object.keys(ca)).not.toContain("privateKey");
    // Still there for the signer.
    expect(ca.privateKey.asymmetricKeyType).toBe("ec");
  });

  it.each([
    [0o640, "0640"],
    [0o604, "0604"],
    [0o644, "0644"],
  ])(
    "refuses a key file of mode %o (group or others can read it), naming the file and chmod 600",
    async (mode, shown) => {
      const written = await files.writeCa("ec-p256", { keyMode: mode });
      const problems = await problemsOf(written);
      expect(problems).toEqual([
        {
          field: "caKeyFile",
          message: `expected a key file only its owner can read, found mode ${shown} on ${written.caKeyFile} (group or others can read it); run \`chmod 600 ${written.caKeyFile}\``,
        },
      ]);
      chmodSync(written.caKeyFile, 0o600);
      expect((await readInterceptCa(written)).problems).toBeUndefined();
    },
  );

  it("accepts 0400 (owner read-only)", async () => {
    const written = await files.writeCa("ec-p256", { keyMode: 0o400 });
    expect((await readInterceptCa(written)).problems).toBeUndefined();
  });

  it("refuses a certificate that is not a CA (basicConstraints CA:FALSE)", async () => {
    const written = await files.writeCa("not-a-ca");
    const problems = await problemsOf(written);
    expect(problems).toHaveLength(1);
    expect(problems[0]?.field).toBe("caCertFile");
    expect(problems[0]?.message).toContain(
      `expected a CA certificate (basicConstraints CA:TRUE), found one for "CN=test interception CA (not-a-ca)" that is not a CA in ${written.caCertFile}`,
    );
    expect(problems[0]?.message).toContain("bearer-proxy intercept-ca --generate DIR");
  });

  it("refuses a CA whose keyUsage lacks keyCertSign", async () => {
    const written = await files.writeCa("no-key-cert-sign");
    expect(await problemsOf(written)).toEqual([
      {
        field: "caCertFile",
        message: `expected a CA certificate whose keyUsage includes keyCertSign, found one for "CN=test interception CA (no-key-cert-sign)" without it in ${written.caCertFile}`,
      },
    ]);
  });

  it("refuses an expired CA certificate", async () => {
    const written = await files.writeCa("expired");
    const [problem, ...rest] = await problemsOf(written);
    expect(rest).toEqual([]);
    expect(problem?.field).toBe("caCertFile");
    expect(problem?.message).toMatch(
      /^expected a CA certificate valid now, found one that expired on \d{4}-\d\d-\d\dT.* in /,
    );
    expect(problem?.message).toContain(written.caCertFile);
  });

  it("refuses a key that does not belong to the certificate", async () => {
    const written = await files.writeCa("mismatched-key");
    expect(await problemsOf(written)).toEqual([
      {
        field: "caKeyFile",
        message: `expected the private key of the certificate in caCertFile (${written.caCertFile}), found another key in ${written.caKeyFile}`,
      },
    ]);
  });

  it("refuses an RSA key of 1024 bits", async () => {
    const written = await files.writeCa("rsa-1024");
    expect(await problemsOf(written)).toEqual([
      {
        field: "caKeyFile",
        message: `expected an RSA key of at least 2048 bits or an EC P-256 key, found an RSA key of 1024 bits in ${written.caKeyFile}`,
      },
    ]);
  });

  it("refuses an EC key on P-384", async () => {
    const written = await files.writeCa("ec-p384");
    expect(await problemsOf(written)).toEqual([
      {
        field: "caKeyFile",
        message: `expected an RSA key of at least 2048 bits or an EC P-256 key, found an EC key on P-384 in ${written.caKeyFile}`,
      },
    ]);
  });

  it("refuses an encrypted key, saying how to decrypt it", async () => {
    const written = await files.writeCa("encrypted-key");
    expect(readFileSync(written.caKeyFile, "utf8")).toContain("ENCRYPTED PRIVATE KEY");
    const problems = await problemsOf(written);
    expect(problems).toHaveLength(1);
    expect(problems[0]?.field).toBe("caKeyFile");
    expect(problems[0]?.message).toContain(
      `expected an unencrypted PEM private key, found an encrypted one in ${written.caKeyFile}`,
    );
  });

  it("reports both files' problems at once", async () => {
    const notCa = await files.writeCa("not-a-ca");
    const open = await files.writeCa("ec-p256", { keyMode: 0o644 });
    const problems = await problemsOf({ caCertFile: notCa.caCertFile, caKeyFile: open.caKeyFile });
    expect(problems.map((p) => p.field)).toEqual(["caCertFile", "caKeyFile"]);
  });

  it("names a missing file", async () => {
    const written = await files.writeCa("ec-p256");
    const missing = `${written.dir}/nope.pem`;
    const problems = await problemsOf({ ...written, caCertFile: missing });
    expect(problems).toEqual([{ field: "caCertFile", message: expect.stringContaining(missing) }]);
  });

  it("loadInterceptCa throws BP_ERR_INTERCEPT_CA naming the field and the file", async () => {
    const written = await files.writeCa("not-a-ca");
    const error = await loadInterceptCa(written).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BearerProxyError);
    expect((error as BearerProxyError).code).toBe("BP_ERR_INTERCEPT_CA");
    expect((error as Error).message).toContain(`intercept.caCertFile: expected a CA certificate`);
    expect((error as Error).message).toContain(written.caCertFile);
  });
});
