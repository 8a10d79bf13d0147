import { Agent, request } from "undici";
import { SCRIPTING_PREVIEW_HEADER } from "../../src/config/api-versions.js";
import { DEMO_CLIENT, startEmulator } from "../../src/emulator/emulator.js";
import type { Emulator, EmulatorOptions } from "../../src/emulator/emulator-types.js";
import type { TestPki } from "./tls.js";
import { useResource } from "./use-resource.js";

/**
 * Start an emulator on 127.0.0.1, a free port, for the enclosing describe block (or each test
 * with `{ each: true }`) and close it afterwards. Returns a getter: call it inside tests.
 */
export function useEmulator(
  options: EmulatorOptions = {},
  lifecycle: { each?: boolean } = {},
): () => Emulator {
  return useResource(
    "useEmulator: the emulator",
    () => startEmulator({ host: "127.0.0.1", port: 0, ...options }),
    (emulator) => emulator.close(),
    lifecycle,
  );
}

/**
 * An emulator on 127.0.0.1, a free port, serving the test PKI's good certificate (so a proxy
 * given `pki.caPem` trusts it). Close it.
 */
export function startTlsEmulator(
  pki: TestPki,
  options: Omit<EmulatorOptions, "tls"> = {},
): Promise<Emulator> {
  return startEmulator({
    host: "127.0.0.1",
    port: 0,
    tls: { certPem: pki.good.certPem, keyPem: pki.good.keyPem, caPem: pki.caPem },
    ...options,
  });
}

/** A dedicated undici Agent that trusts the emulator's CA (never the global dispatcher). Close it. */
export function undiciAgentFor(emulator: Emulator, options: Agent.Options = {}): Agent {
  return new Agent({ ...options, connect: { ...options.connect, ca: emulator.caPem } });
}

/**
 * An `undiciAgentFor` the emulator of `useEmulator`, made once it runs and closed afterwards; pass
 * the same `{ each: true }` as to `useEmulator`. Returns a getter: call it inside tests.
 */
export function useEmulatorAgent(
  emulator: () => Emulator,
  lifecycle: { each?: boolean } = {},
): () => Agent {
  return useResource(
    "useEmulatorAgent: the agent",
    () => undiciAgentFor(emulator()),
    (agent) => agent.close(),
    lifecycle,
  );
}

/** Get a token the straightforward way (form body, demo client by default); throws unless 200. */
export async function fetchEmulatorToken(
  emulator: Emulator,
  agent: Agent,
  options: { preview?: boolean; clientId?: string; clientSecret?: string } = {},
): Promise<string> {
  const body = new URLSearchParams({
    grant_type: "client_credentials",
    client_id: options.clientId ?? DEMO_CLIENT.clientId,
    client_secret: options.clientSecret ?? DEMO_CLIENT.clientSecret,
  });
  const response = await request(
    `${emulator.url}${options.preview ? "/oauth2/token" : "/iam/v1/oauth2/token"}`,
    {
      method: "POST",
      dispatcher: agent,
      headers: {
        "content-type": "application/x-www-form-urlencoded;charset=UTF-8",
        ...(options.preview ? { "x-version": SCRIPTING_PREVIEW_HEADER } : {}),
      },
      body: body.toString(),
    },
  );
  const json = (await response.body.json()) as { access_token?: string };
  if (response.statusCode !== 200 || typeof json.access_token !== "string") {
    throw new Error(`emulator token request failed with ${response.statusCode}`);
  }
  return json.access_token;
}
