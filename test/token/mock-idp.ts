import { MockAgent } from "undici";
import { afterEach, beforeEach } from "vitest";

export const IDP_ORIGIN = "https://idp.test";

/** A fresh MockAgent per test, net disabled, failing on unused intercepts (oauth4webapi style). */
export function useMockAgent(): () => MockAgent {
  let agent: MockAgent | undefined;
  beforeEach(() => {
    agent = new MockAgent();
    agent.disableNetConnect();
  });
  afterEach(async () => {
    const current = agent!;
    agent = undefined;
    current.assertNoPendingInterceptors();
    await current.close();
  });
  return () => agent!;
}

export interface CapturedRequest {
  path: string;
  method: string;
  headers: Record<string, string>;
  body: string;
}

/** Normalise the headers MockAgent hands a reply callback. */
export function headersOf(raw: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (Array.isArray(raw)) {
    for (let i = 0; i < raw.length; i += 2) out[String(raw[i]).toLowerCase()] = String(raw[i + 1]);
  } else if (raw && typeof raw === "object") {
    for (const [k, v] of Object.entries(raw)) out[k.toLowerCase()] = String(v);
  }
  return out;
}

export const JSON_HEADERS = { headers: { "content-type": "application/json" } };

export function tokenBody(overrides: Record<string, unknown> = {}): string {
  return JSON.stringify({
    access_token: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJkZW1vIn0.c2lnbmF0dXJl",
    token_type: "Bearer",
    expires_in: 599,
    scope: "files:read files:write",
    ...overrides,
  });
}
