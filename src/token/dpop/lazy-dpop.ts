/**
 * One credential's DPoP key as its token source holds it: loaded on the first fetch through a
 * dynamic import, so a sidecar without `upstreams[].dpop` loads nothing of this room; kept for
 * the source's life and closed with it. A key that cannot be loaded fails that fetch with
 * BP_ERR_DPOP_KEY naming `dpop.keyFile`, and the next fetch tries again (the file may be fixed).
 */

import type { Clock } from "../../base/clock.js";
import type { DpopSpec } from "../../config/proxy-config.js";
import { BearerProxyError, errorMessage } from "../../errors.js";
import type { Dpop } from "./index.js";

export interface LazyDpopOptions {
  clock?: Clock | undefined;
  /** How often `dpop.keyFile` is stat()ed; 0 disables polling. Default 5 s. */
  pollIntervalMs?: number | undefined;
  /** The key is loaded (once). */
  onLoad?: ((dpop: Dpop) => void) | undefined;
  /** The key file now holds another key: tokens bound to the old one are useless. */
  onKeyChange?: ((jkt: string) => void) | undefined;
  /** The key file changed to something unusable; the previous key stays in force. */
  onKeyReloadError?: ((error: BearerProxyError) => void) | undefined;
}

export interface LazyDpop {
  /** The key once loaded, else undefined. */
  readonly current: Dpop | undefined;
  /** The key, loading it on the first call. Rejects with BP_ERR_DPOP_KEY. */
  get(): Promise<Dpop>;
  close(): void;
}

export function createLazyDpop(spec: DpopSpec, options: LazyDpopOptions = {}): LazyDpop {
  let current: Dpop | undefined;
  let loading: Promise<Dpop> | undefined;
  let closed = false;

  async function load(): Promise<Dpop> {
    let dpop: Dpop;
    try {
      const { createDpop } = await import("./index.js");
      dpop = await createDpop(spec, {
        clock: options.clock,
        pollIntervalMs: options.pollIntervalMs,
        onKeyReloadError: options.onKeyReloadError,
      });
    } catch (error) {
      throw dpopKeyError(spec, error);
    }
    if (closed) {
      dpop.close();
      throw new BearerProxyError(
        "BP_ERR_DPOP_KEY",
        "the DPoP key was loaded after its source closed",
      );
    }
    if (options.onKeyChange) dpop.onKeyChange(options.onKeyChange);
    current = dpop;
    options.onLoad?.(dpop);
    return dpop;
  }

  return {
    get current() {
      return current;
    },
    get() {
      if (current) return Promise.resolve(current);
      loading ??= load().finally(() => {
        loading = undefined;
      });
      return loading;
    },
    close() {
      closed = true;
      current?.close();
      current = undefined;
    },
  };
}

/** The loader's messages name `dpop.keyFile` and the problem, never the key's bytes. */
function dpopKeyError(spec: DpopSpec, error: unknown): BearerProxyError {
  const reason = errorMessage(error);
  const what =
    spec.keyFile === undefined
      ? `cannot make an ephemeral ${spec.algorithm ?? "ES256"} DPoP key (${reason})`
      : reason;
  return new BearerProxyError("BP_ERR_DPOP_KEY", `cannot sign DPoP proofs: ${what}`, {
    cause: error,
  });
}
