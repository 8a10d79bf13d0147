import { Agent, request } from "undici";
import { afterAll, afterEach, beforeAll, beforeEach } from "vitest";
import { SCRIPTING_PREVIEW_HEADER } from "../../src/config/api-versions.js";
import { DEMO_CLIENT, startEmulator } from "../../src/emulator/emulator.js";
import type { Emulator, EmulatorOptions } from "../../src/emulator/types.js";

/**
 * Start an emulator on 127.0.0.1, a free port, for the enclosing describe block (or each test
 * with `{ each: true }`) and close it afterwards. Returns a getter: call it inside tests.
 */
export function useEmulator(
  options: EmulatorOptions = {},
  lifecycle: { each?: boolean } = {},
): () => Emulator {
  let emulator: Emulator | undefined;
  const start = async () => {
    emulator = await startEmulator({ host: "127.0.0.1", port: 0, ...options });
  };
  const stop = async () => {
    await emulator?.close();
    emulator = undefined;
  };
  if (lifecycle.each) {
    beforeEach(start);
    afterEach(stop);
  } else {
    beforeAll(start);
    afterAll(stop);
  }
  return () => {
    if (!emulator) throw new Error("useEmulator: the emulator is only available inside tests");
    return emulator;
  };
}

/** A dedicated undici Agent that trusts the emulator's CA (never the global dispatcher). Close it. */
export function undiciAgentFor(emulator: Emulator, options: Agent.Options = {}): Agent {
  return new Agent({ ...options, connect: { ...options.connect, ca: emulator.caPem } });
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
