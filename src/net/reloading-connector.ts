/**
 * An undici connector that picks up a rotated client certificate (tls-client-auth, RFC 8705):
 * before each new connection it stat()s certificate and key (microseconds; connections to a
 * token endpoint are rare) and, when they changed, builds a fresh connector from the new files.
 * A fresh connector also starts a fresh TLS session cache, so a resumed session cannot carry the
 * old certificate's identity. A half-rotated pair (new certificate, old key) does not build:
 * the previous connector keeps serving until the pair matches again.
 */
import type { buildConnector as BuildConnector } from "undici";
import { statSignatureSync } from "../base/file-poll.js";
import { buildConnector } from "./undici-core.js";

/**
 * `build` returns the TLS options for the files as they are now (it reads them); `make` turns
 * them into a connector (default undici's; the upstream's keeps its read-after-reset handling).
 */
export function createReloadingConnector(
  files: readonly string[],
  build: () => BuildConnector.BuildOptions,
  make: (options: BuildConnector.BuildOptions) => BuildConnector.connector = buildConnector,
): BuildConnector.connector {
  let signature: string | undefined;
  let current: BuildConnector.connector | undefined;
  return (options, callback) => {
    const now = currentSignature(files);
    if (current === undefined || (now !== undefined && now !== signature)) {
      try {
        current = make(build());
        signature = now;
      } catch (error) {
        if (current === undefined) {
          callback(error as Error, null);
          return;
        }
      }
    }
    current(options, callback);
  };
}

function currentSignature(files: readonly string[]): string | undefined {
  try {
    return statSignatureSync(files);
  } catch {
    return undefined; // mid-swap: keep what we have
  }
}
