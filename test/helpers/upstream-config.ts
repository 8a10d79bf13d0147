/**
 * Runtime configs for unit tests, built by the product's own normalizer from a small config
 * document: every default and derived value (token URL, X-Version, TLS) is the one the loader
 * would produce, so tests never keep a hand-written twin of `ProxyConfig` that drifts from it.
 */
import { normalizeConfig } from "../../src/config/normalize.js";
import type {
  ProxyConfig,
  TokenEndpointSpec,
  TokenPolicy,
  UpstreamConfig,
} from "../../src/config/proxy-config.js";
import type { ConfigFile, UpstreamConfigFile } from "../../src/config/schema.js";

/** Credentials of the emulator's built-in demo client. */
export const DEMO_CREDENTIALS = { clientId: "demo-client", clientSecret: "demo-secret" } as const;

const PATHS = { baseDir: process.cwd(), cwd: process.cwd(), provenance: new Map<string, string>() };

function normalize(file: ConfigFile): ProxyConfig {
  return normalizeConfig(file, PATHS);
}

/**
 * One upstream as the loader builds it from `file` (default: `https://<name>.example.test`, the
 * demo client's inline credentials), then `overrides` for runtime values no valid file gives.
 */
export function makeUpstreamConfig(
  name: string,
  file: Partial<UpstreamConfigFile> = {},
  overrides: Partial<UpstreamConfig> = {},
): UpstreamConfig {
  const upstream: UpstreamConfigFile = {
    name,
    baseUrl: `https://${name}.example.test`,
    ...(file.clientIdFile ? {} : { clientId: DEMO_CREDENTIALS.clientId }),
    ...(file.clientSecretFile ? {} : { clientSecret: DEMO_CREDENTIALS.clientSecret }),
    ...file,
  };
  const built = normalize({ upstreams: [upstream] }).upstreams[0]!;
  return { ...built, ...overrides };
}

/** A proxy config around `upstreams` with the defaults, both listeners on 127.0.0.1 port 0. */
export function makeProxyConfig(
  upstreams: readonly UpstreamConfig[],
  file: Partial<ConfigFile> = {},
): ProxyConfig {
  const base = normalize({
    listen: { port: 0 },
    admin: { port: 0 },
    ...file,
    // The loader needs one upstream; it is replaced by `upstreams`.
    upstreams: [{ name: "unused", baseUrl: "https://unused.example.test", ...DEMO_CREDENTIALS }],
  });
  return { ...base, upstreams };
}

/** The documented token policy defaults (schema.ts), in ms, as the loader derives them. */
export const DEFAULT_POLICY: TokenPolicy = Object.freeze(makeUpstreamConfig("policy").tokenPolicy);

/**
 * A token endpoint spec as the loader derives it for `file` (default base URL `https://idp.test`,
 * so the token URL is `https://idp.test/iam/v1/oauth2/token`), with runtime `overrides`.
 */
export function makeTokenSpec(
  file: Partial<UpstreamConfigFile> = {},
  overrides: Partial<TokenEndpointSpec> = {},
): TokenEndpointSpec {
  return {
    ...makeUpstreamConfig("idp", { baseUrl: "https://idp.test", ...file }).token,
    ...overrides,
  };
}
