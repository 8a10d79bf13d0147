/**
 * The upstream's API versions (shared/SPEC.md "API versions"). A version decides the token
 * endpoint path and whether requests carry `X-Version`.
 */

export interface ApiVersionSpec {
  /** Token endpoint path under the base URL. */
  tokenPath: string;
  /** X-Version sent on token and API requests; undefined for the default version. */
  versionHeader: string | undefined;
}

export const DEFAULT_API_VERSION = "default";
export const SCRIPTING_PREVIEW = "scripting-preview";
export const SCRIPTING_PREVIEW_HEADER = "2026-09-01.scripting.preview";

export const KNOWN_API_VERSIONS: Readonly<Record<string, ApiVersionSpec>> = Object.freeze({
  [DEFAULT_API_VERSION]: { tokenPath: "/iam/v1/oauth2/token", versionHeader: undefined },
  [SCRIPTING_PREVIEW]: { tokenPath: "/oauth2/token", versionHeader: SCRIPTING_PREVIEW_HEADER },
  // The literal header value selects the same version as its alias.
  [SCRIPTING_PREVIEW_HEADER]: {
    tokenPath: "/oauth2/token",
    versionHeader: SCRIPTING_PREVIEW_HEADER,
  },
});

/**
 * Resolve a configured `apiVersion`. Unknown values are sent verbatim as `X-Version` and need an
 * explicit token path (the spec does not say where their token endpoint is).
 */
export function resolveApiVersion(
  apiVersion: string,
  tokenPath: string | undefined,
): ApiVersionSpec | undefined {
  const known = KNOWN_API_VERSIONS[apiVersion];
  if (known) return tokenPath ? { ...known, tokenPath } : known;
  if (!tokenPath) return undefined;
  return { tokenPath, versionHeader: apiVersion };
}
