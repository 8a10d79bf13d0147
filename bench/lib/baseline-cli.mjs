/**
 * What every Node baseline in bench/baselines/ shares, so a new one is only its forwarding code:
 * the command line (`--upstream URL --ca FILE [--token T] [--port N] [--servername NAME]
 * [--feature NAME]`), the
 * ready line competitors.mjs waits for (`<TAG> {"port":N}`), and a prompt exit on SIGTERM or
 * SIGINT (the bench stops competitors often).
 */
import { parseArgs } from "node:util";

/** The baseline's options; prints the usage of `script` and exits 2 when one is missing. */
export function readBaselineArgs(script) {
  const { values } = parseArgs({
    options: {
      upstream: { type: "string" },
      ca: { type: "string" },
      token: { type: "string", default: "bench-static-token" },
      port: { type: "string", default: "0" },
      servername: { type: "string", default: "localhost" },
      // undici-forwarder.mjs only: one bearer-proxy feature's own code per request (dpop, tracing).
      feature: { type: "string" },
    },
  });
  if (!values.upstream || !values.ca) {
    process.stderr.write(`usage: ${script} --upstream URL --ca FILE [--token T]\n`);
    process.exit(2);
  }
  return values;
}

/** Tell competitors.mjs the baseline listens on `port`. */
export function announceReady(tag, port) {
  process.stdout.write(`${tag} ${JSON.stringify({ port })}\n`);
}

/** On SIGTERM or SIGINT: `close()` (may return a promise), then exit 0 — within a second. */
export function exitOnSignal(close) {
  for (const signal of ["SIGTERM", "SIGINT"]) {
    process.on(signal, () => {
      setTimeout(() => process.exit(0), 1000).unref();
      Promise.resolve()
        .then(close)
        .finally(() => process.exit(0));
    });
  }
}
