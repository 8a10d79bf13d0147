/** The upstream emulator: a strict HTTPS implementation of shared/SPEC.md for dev and tests. */
export type { AccessTokenClaims } from "./access-tokens.js";
export { type GeneratedCertificates, generateCertificates } from "./certificates.js";
export { DOWNLOAD_PATTERN_PERIOD, downloadPattern, sha256OfDownload } from "./download-pattern.js";
export { DEMO_CLIENT, describeEmulator, startEmulator } from "./emulator.js";
export type * from "./emulator-types.js";
export type { EchoResponse } from "./test-routes.js";
export { DEFAULT_VERSION, TOKEN_PATHS } from "./token-endpoint.js";
