/**
 * An upstream's `tls.caFile` adds to the trust store, never replaces it: its context trusts the
 * file's CA, NODE_EXTRA_CA_CERTS (which Node keeps in one store with the bundled roots) and
 * nothing else. The context is built on a copy of Node's own roots (src/net/dispatcher.ts,
 * rootsPlus), which leaves NODE_EXTRA_CA_CERTS out unless added. Run in a child Node (the built
 * dist/), since Node reads NODE_EXTRA_CA_CERTS only when a process starts.
 */
import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { removeTempDirs, tempDir } from "../config/load-helpers.js";
import { generateCertificates } from "../helpers/tls.js";

const DISPATCHER = pathToFileURL(join(import.meta.dirname, "../../dist/net/dispatcher.js")).href;

/** Connects with the context `buildTlsOptions` builds for `caFile`; prints each verdict. */
const CHECK = `
import { connect } from "node:tls";
import { buildTlsOptions } from ${JSON.stringify(DISPATCHER)};
const [caFile, extra, ...ports] = process.argv.slice(1);
const options = buildTlsOptions({ caFile }, extra === "-" ? undefined : extra);
const verdicts = [];
for (const port of ports) {
  verdicts.push(await new Promise((resolve) => {
    const socket = connect({ ...options, host: "127.0.0.1", port: Number(port), servername: "localhost" });
    socket.on("secureConnect", () => { socket.destroy(); resolve("trusted"); });
    socket.on("error", (error) => resolve(error.code));
  }));
}
process.stdout.write(JSON.stringify(verdicts));
`;

describe("the trust store of an upstream with tls.caFile", () => {
  const servers: Server[] = [];
  let dir: string;
  const files = { fileCa: "", extraCa: "" };
  const ports = { fileCa: 0, extraCa: 0, unknownCa: 0 };

  beforeAll(async () => {
    dir = tempDir();
    const [byFileCa, byExtraCa, byUnknownCa] = await Promise.all([
      generateCertificates(),
      generateCertificates(),
      generateCertificates(),
    ]);
    files.fileCa = join(dir, "file-ca.pem");
    files.extraCa = join(dir, "extra-ca.pem");
    writeFileSync(files.fileCa, byFileCa.caPem);
    writeFileSync(files.extraCa, byExtraCa.caPem);
    for (const [name, pki] of [
      ["fileCa", byFileCa],
      ["extraCa", byExtraCa],
      ["unknownCa", byUnknownCa],
    ] as const) {
      const server = createServer({ cert: pki.certPem, key: pki.keyPem }, (_req, res) => res.end());
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      servers.push(server);
      ports[name] = (server.address() as AddressInfo).port;
    }
  });

  afterAll(async () => {
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
    removeTempDirs();
  });

  async function verdicts(extra: string | undefined, env: Record<string, string>) {
    const { NODE_EXTRA_CA_CERTS: _, ...inherited } = process.env;
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        CHECK,
        files.fileCa,
        extra ?? "-",
        String(ports.fileCa),
        String(ports.extraCa),
        String(ports.unknownCa),
      ],
      { env: { ...inherited, NODE_OPTIONS: "", ...env } },
    );
    return JSON.parse(stdout) as string[];
  }

  it("keeps NODE_EXTRA_CA_CERTS beside the file", async () => {
    expect(await verdicts(files.extraCa, { NODE_EXTRA_CA_CERTS: files.extraCa })).toEqual([
      "trusted",
      "trusted",
      "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
    ]);
  });

  it("trusts the extra CA file it is given, whatever the process started with", async () => {
    expect(await verdicts(files.extraCa, {})).toEqual([
      "trusted",
      "trusted",
      "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
    ]);
  });

  it("trusts the file's CA and no other without NODE_EXTRA_CA_CERTS", async () => {
    expect(await verdicts(undefined, {})).toEqual([
      "trusted",
      "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
      "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
    ]);
  });
});
