/** What `bearer-proxy validate` prints: every problem, then the warnings gathered on the way. */
import { describe, expect, it } from "vitest";
import { configErrorWarnings, formatConfigError, loadConfig } from "../../src/config/load.js";
import { ConfigError } from "../../src/errors.js";

describe("formatConfigError", () => {
  it("lists every problem and the warnings that may explain them", async () => {
    const error = await loadConfig({
      env: {
        BEARER_PROXY_BASE_URL: "https://api.example.com",
        BEARER_PROXY_CLIENT_ID: "a",
        BEARER_PROXY_CLIENT_SECRT: "typo",
      },
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect(configErrorWarnings(error)).toEqual([
      'env BEARER_PROXY_CLIENT_SECRT: unknown variable, ignored (did you mean "BEARER_PROXY_CLIENT_SECRET"?)',
    ]);
    expect(formatConfigError(error)).toBe(
      [
        "invalid configuration (1 problem)",
        "  upstreams[0] (default): expected exactly one of clientSecret and clientSecretFile, found neither; set BEARER_PROXY_CLIENT_SECRET or BEARER_PROXY_CLIENT_SECRET_FILE (flags --client-secret, --client-secret-file)",
        "warnings (1):",
        '  env BEARER_PROXY_CLIENT_SECRT: unknown variable, ignored (did you mean "BEARER_PROXY_CLIENT_SECRET"?)',
      ].join("\n"),
    );
    expect(formatConfigError(error)).not.toContain("typo");
  });

  it("gives the message of other errors", () => {
    expect(formatConfigError(new Error("boom"))).toBe("boom");
    expect(formatConfigError("text")).toBe("text");
    expect(configErrorWarnings(new Error("x"))).toEqual([]);
  });
});
