/**
 * The interception CA of a running proxy (`intercept`): loaded and checked before any port is
 * bound, a first leaf minted to prove it signs, then held for the CONNECT handler's leaves and
 * shown on /status. Changing `intercept` needs a restart (reload/live-changes.ts), so it is
 * built once per process. Without `intercept` nothing here loads.
 */

import { authorityHost, interceptRoutes } from "../base/authority.js";
import { type CaSummary, caSummary, loadInterceptCa } from "../config/intercept-ca.js";
import type { ProxyConfig } from "../config/proxy-config.js";
import type { LeafCertificates } from "../intercept/leaf-certificates.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";

export interface InterceptSource {
  /** Load and check the CA, and mint a first leaf; rejects (failing the start) when it cannot. */
  ready(): Promise<void>;
  /** The CA's public facts once loaded; undefined before, or without `intercept`. */
  ca(): CaSummary | undefined;
  /** Leaf certificates for intercepted hosts once loaded; undefined before, or without `intercept`. */
  leaves(): LeafCertificates | undefined;
}

export function buildInterceptSource(
  config: ProxyConfig,
  deps: { logger: Logger; metrics: Metrics },
): InterceptSource {
  const files = config.intercept;
  let summary: CaSummary | undefined;
  let leaves: LeafCertificates | undefined;
  let loading: Promise<void> | undefined;

  async function load(): Promise<void> {
    if (files === undefined) return;
    const ca = await loadInterceptCa(files);
    const { createLeafCertificates } = await import("../intercept/leaf-certificates.js");
    const factory = createLeafCertificates({ ca });
    const routes = [...interceptRoutes(config.upstreams).entries()];
    // One leaf now: a CA that passed the checks but cannot sign fails the start, not a client.
    const first = routes[0];
    if (first !== undefined) await factory.leafFor(authorityHost(first[0]));
    summary = caSummary(ca);
    leaves = factory;
    deps.metrics.interceptCaExpiryTimestampSeconds.set(Math.floor(ca.notAfter.getTime() / 1000));
    deps.logger.info(
      {
        ca: { subject: ca.subject, fingerprintSha256: ca.fingerprintSha256, key: ca.key },
        caExpiresAt: ca.notAfter.toISOString(),
        intercepted: routes.map(([authority, u]) => ({ upstream: u.name, authority })),
      },
      `CONNECT interception with CA "${ca.subject}" (SHA-256 ${ca.fingerprintSha256}, expires ${ca.notAfter.toISOString()}) for ${routes.map(([authority, u]) => `${u.name} (${authority})`).join(", ") || "no upstream"}`,
    );
  }

  return {
    ready() {
      loading ??= load();
      return loading;
    },
    ca: () => summary,
    leaves: () => leaves,
  };
}
