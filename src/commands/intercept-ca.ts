/**
 * `bearer-proxy intercept-ca`: print the CONNECT interception CA's certificate (stdout: PEM
 * only, for `> ca.pem` and `--cacert`), with one line on stderr saying how each tool is told to
 * trust it. `--generate DIR` makes a CA for local use instead (intercept/generate-ca.ts).
 */
import type { Writable } from "node:stream";
import { loadInterceptCa } from "../config/intercept-ca.js";
import { generateInterceptCa, writeInterceptCa } from "../intercept/generate-ca.js";
import { configFlagsFrom } from "./config-flags.js";
import { loadOrReport } from "./run.js";

type Values = Record<string, string | boolean | undefined>;

export interface InterceptCaIo {
  stdout: Writable;
  stderr: Writable;
}

/** How each tool is told to trust `file`, in one line (the details: docs/legacy-tools.md). */
export function trustHint(file: string): string {
  return [
    `trust ${file}: curl --cacert FILE`,
    "wget --ca-certificate=FILE",
    "git -c http.sslCAInfo=FILE",
    "SSL_CERT_FILE=FILE (OpenSSL-based tools)",
    "REQUESTS_CA_BUNDLE=FILE (Python requests)",
    "NODE_EXTRA_CA_CERTS=FILE (Node)",
    "keytool -importcert -alias bearer-proxy -file FILE -keystore … (Java)",
    "see docs/legacy-tools.md",
  ].join(" · ");
}

/** `bearer-proxy intercept-ca`: resolves with the exit code. */
export async function interceptCaCommand(
  values: Values,
  io: InterceptCaIo = { stdout: process.stdout, stderr: process.stderr },
): Promise<number> {
  if (typeof values.generate === "string") return generate(values.generate, values, io);
  const loaded = await loadOrReport(values);
  if (!loaded) return 1;
  const files = loaded.config.intercept;
  if (files === undefined) {
    io.stderr.write(
      "bearer-proxy intercept-ca: the configuration has no intercept block (intercept.caCertFile, intercept.caKeyFile); make a CA with `bearer-proxy intercept-ca --generate DIR`\n",
    );
    return 1;
  }
  // Checked by the load already; read again for every certificate of the file (the chain).
  const ca = await loadInterceptCa(files);
  io.stdout.write(ca.chainPem);
  io.stderr.write(
    `${ca.subject}, SHA-256 ${ca.fingerprintSha256}, expires ${ca.notAfter.toISOString()}\n${trustHint(files.caCertFile)}\n`,
  );
  return 0;
}

async function generate(dir: string, values: Values, io: InterceptCaIo): Promise<number> {
  const configFlags = Object.keys(configFlagsFrom(values));
  if (values.config !== undefined || configFlags.length > 0) {
    io.stderr.write(
      "bearer-proxy intercept-ca: --generate makes a new CA and reads no configuration; run it without --config and config flags\n",
    );
    return 2;
  }
  let written: { certFile: string; keyFile: string };
  const ca = await generateInterceptCa();
  try {
    written = await writeInterceptCa(dir, ca);
  } catch (error) {
    io.stderr.write(`bearer-proxy intercept-ca: ${(error as Error).message}\n`);
    return 1;
  }
  io.stdout.write(ca.certPem);
  io.stderr.write(
    [
      `wrote ${written.certFile} and ${written.keyFile} (mode 0600: keep it so; whoever holds it can impersonate the intercepted hosts to every client that trusts the CA)`,
      "configure it:",
      "  intercept:",
      `    caCertFile: ${written.certFile}`,
      `    caKeyFile: ${written.keyFile}`,
      trustHint(written.certFile),
      "",
    ].join("\n"),
  );
  return 0;
}
