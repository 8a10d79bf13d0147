/**
 * What the in-process authorization servers (dpop-authorization-server.ts,
 * mtls-authorization-server.ts) share around node-oidc-provider 9. It ships no type
 * declarations, so it is imported by a computed specifier (the type checker does not look for
 * them) and used through the few members below.
 */
import type { Server } from "node:net";

export interface ProviderInstance {
  callback(): (req: unknown, res: unknown) => void;
}
export type ProviderClass = new (
  issuer: string,
  configuration: Record<string, unknown>,
) => ProviderInstance;

const OIDC_PROVIDER = "oidc-provider";

/** The `Provider` class, loaded on first use. */
export async function loadProvider(): Promise<ProviderClass> {
  const { default: Provider } = (await import(OIDC_PROVIDER)) as { default: ProviderClass };
  return Provider;
}

/**
 * `features.resourceIndicators` (RFC 8707) for one resource: every client-credentials token is
 * for `resource` (also its `aud`), a JWT signed ES256 that lives `ttlSeconds`.
 */
export function oneResourceIndicator(resource: string, scope: string, ttlSeconds: number) {
  return {
    enabled: true,
    // A client-credentials request without `resource` still gets the one resource.
    defaultResource: async () => resource,
    useGrantedResource: async () => true,
    getResourceServerInfo: async (_ctx: unknown, indicator: string) => {
      if (indicator !== resource) throw new Error(`unknown resource ${indicator}`);
      return {
        scope,
        audience: resource,
        accessTokenFormat: "jwt",
        accessTokenTTL: ttlSeconds,
        jwt: { sign: { alg: "ES256" } },
      };
    },
  };
}

/** Close `server` now, dropping keep-alive connections. */
export function closeNow(server: Server & { closeAllConnections(): void }): Promise<void> {
  return new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
}
