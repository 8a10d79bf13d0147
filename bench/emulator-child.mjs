/**
 * Runs the project's token endpoint emulator (compiled, from dist/) in its own process with the
 * bench's certificate, so bearer-proxy fetches real tokens over verified TLS and the bench can
 * read how many token requests it made (GET /_emulator/stats).
 *
 *   node bench/emulator-child.mjs --cert FILE --key FILE --ca FILE [--module FILE]
 * prints `EMULATOR_READY {"port":N,"url":"https://127.0.0.1:N"}`.
 *
 * ADAPTER: depends on dist/emulator/emulator.js exporting
 *   startEmulator({host, port, tls: {certPem, keyPem, caPem}, caFile}) → {url, port, close()}.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    cert: { type: "string" },
    key: { type: "string" },
    ca: { type: "string" },
    port: { type: "string", default: "0" },
    module: { type: "string" },
  },
});
if (!values.cert || !values.key || !values.ca) {
  process.stderr.write("usage: emulator-child.mjs --cert FILE --key FILE --ca FILE\n");
  process.exit(2);
}

const modulePath =
  values.module ?? fileURLToPath(new URL("../dist/emulator/emulator.js", import.meta.url));
const { startEmulator } = await import(pathToFileURL(modulePath).href);
const emulator = await startEmulator({
  host: "127.0.0.1",
  port: Number(values.port),
  tls: {
    certPem: readFileSync(values.cert, "utf8"),
    keyPem: readFileSync(values.key, "utf8"),
    caPem: readFileSync(values.ca, "utf8"),
  },
  // Its own copy: the emulator may remove the file it wrote when it closes.
  caFile: join(dirname(values.ca), "emulator-ca.pem"),
});
const port = emulator.port ?? Number(new URL(emulator.url).port);
process.stdout.write(`EMULATOR_READY ${JSON.stringify({ port, url: emulator.url })}\n`);
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => {
    Promise.resolve(emulator.close()).finally(() => process.exit(0));
    setTimeout(() => process.exit(0), 1000).unref();
  });
}
