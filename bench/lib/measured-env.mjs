/**
 * The environment of a process the bench measures: this process's, without the host's
 * NODE_EXTRA_CA_CERTS. The image sets none, and a host that does (this development VM points it
 * at its system bundle, ~145 certificates) makes every start with `tls.caFile` parse that bundle
 * into its trust (src/net/dispatcher.ts `rootsPlus`): +50–60 ms to ready on Node 20 and +25–30
 * on Node 24 here (bench/PROFILE.md, eighteenth pass) — the host's cost, not the proxy's. A flag
 * set or a cell that means to measure it passes it in `extra`.
 */
const { NODE_EXTRA_CA_CERTS: hostExtraCaCerts, ...withoutExtraCa } = process.env;

/** The host's NODE_EXTRA_CA_CERTS, left out of measured processes (undefined: not set). */
export const HOST_EXTRA_CA_CERTS = hostExtraCaCerts;

/** `process.env` without NODE_EXTRA_CA_CERTS, then `extra` on top. */
export function measuredEnv(extra = {}) {
  return { ...withoutExtraCa, ...extra };
}
