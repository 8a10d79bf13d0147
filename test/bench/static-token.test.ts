/**
 * Issue 33: the baselines' static token is as long as the token bearer-proxy injects in the bench
 * (the emulator's JWT for the bench's client at the default version and scope), so the request
 * heads the two send upstream differ in nothing the proxy does not add itself.
 */
import { describe, expect, it } from "vitest";
import { createAccessTokenAuthority } from "../../src/emulator/access-tokens.js";
import { DEFAULT_VERSION } from "../../src/emulator/token-endpoint.js";

const { STATIC_TOKEN } = (await import(
  new URL("../../bench/lib/competitors.mjs", import.meta.url).href
)) as { STATIC_TOKEN: string };

describe("the baselines' static token", () => {
  it("is as long as the emulator's token for the bench's client, and shaped like it", () => {
    // bench/lib/bearer-proxy.mjs configures clientId demo-client, no version, no scope.
    const issued = createAccessTokenAuthority(Date.now).issue(
      "demo-client",
      DEFAULT_VERSION,
      "files:read files:write",
      600,
    );
    expect(STATIC_TOKEN).toHaveLength(issued.length);
    expect(STATIC_TOKEN.split(".").map((part) => part.length)).toEqual(
      issued.split(".").map((part) => part.length),
    );
  });
});
