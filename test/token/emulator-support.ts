import type { Dispatcher } from "undici";
import { request } from "undici";
import { SCRIPTING_PREVIEW_HEADER } from "../../src/config/api-versions.js";
import type { TokenEndpointSpec, UpstreamTls } from "../../src/config/proxy-config.js";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { createDispatcher } from "../../src/net/dispatcher.js";
import { makeSpec } from "./helpers.js";

export type Version = "default" | "preview";

export function emulatorTls(emulator: Emulator): UpstreamTls {
  return {
    caFile: emulator.caFile,
    certFile: undefined,
    keyFile: undefined,
    serverName: undefined,
  };
}

/** The token endpoint spec config loading would derive for the emulator. */
export function emulatorSpec(
  emulator: Emulator,
  version: Version,
  overrides: Partial<TokenEndpointSpec> = {},
): TokenEndpointSpec {
  return makeSpec({
    tokenUrl: `${emulator.url}${version === "preview" ? "/oauth2/token" : "/iam/v1/oauth2/token"}`,
    versionHeader: version === "preview" ? SCRIPTING_PREVIEW_HEADER : undefined,
    clientId: { kind: "inline", value: "demo-client" },
    clientSecret: { kind: "inline", value: "demo-secret" },
    tls: emulatorTls(emulator),
    ...overrides,
  });
}

export function tokenDispatcher(tls: UpstreamTls): Dispatcher {
  return createDispatcher({
    tls,
    connections: 4,
    connectTimeoutMs: 5_000,
    headersTimeoutMs: 10_000,
    bodyTimeoutMs: 10_000,
    idleConnectionMs: 4_000,
    egressProxy: undefined,
    extraCaCertsFile: undefined,
  });
}

/** Call an API route of the given version with the token; returns the status. */
export async function callApi(
  emulator: Emulator,
  dispatcher: Dispatcher,
  version: Version,
  token: string,
): Promise<number> {
  const response = await request(
    `${emulator.url}${version === "preview" ? "/scripts" : "/platform/v1/spreadsheets/sheet-1"}`,
    {
      dispatcher,
      headers: {
        authorization: `Bearer ${token}`,
        ...(version === "preview" ? { "x-version": SCRIPTING_PREVIEW_HEADER } : {}),
      },
    },
  );
  await response.body.dump();
  return response.statusCode;
}
