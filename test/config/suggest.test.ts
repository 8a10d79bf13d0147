/** "Did you mean …?": the nearest candidate by edit distance, within a typo's reach. */
import { describe, expect, it } from "vitest";
import { didYouMean, suggest } from "../../src/config/suggest.js";

const UPSTREAM_KEYS = [
  "name",
  "baseUrl",
  "clientId",
  "clientIdFile",
  "clientSecret",
  "clientSecretFile",
  "clientAuth",
  "clientKeyFile",
  "stripPrefix",
  "listen",
];

describe("suggest", () => {
  it.each([
    // Issue 32: a transposition in the longer key beats the shorter key the typo starts with.
    ["clientIdFlie", "clientIdFile", UPSTREAM_KEYS],
    ["clientSecretFlie", "clientSecretFile", UPSTREAM_KEYS],
    ["clientIdFil", "clientIdFile", UPSTREAM_KEYS],
    // A whole word with a bit more or less still counts, and so does another case.
    ["clientid", "clientId", UPSTREAM_KEYS],
    ["stripPrefx", "stripPrefix", UPSTREAM_KEYS],
    ["warning", "warn", ["trace", "debug", "info", "warn", "error"]],
    ["upstream", "upstreams", ["listen", "admin", "upstreams"]],
    ["lissten", "listen", ["listen", "admin", "upstreams"]],
    // Flags.
    ["confg", "config", ["config", "base-url", "listen"]],
    ["emulator-prot", "emulator-port", ["port", "admin-port", "emulator-port"]],
    ["porr", "port", ["port", "admin-port", "emulator-port"]],
    [
      "BEARER_PROXY_CLIENT_SECRT",
      "BEARER_PROXY_CLIENT_SECRET",
      ["BEARER_PROXY_CLIENT_SECRET", "BEARER_PROXY_CLIENT_ID"],
    ],
  ])("%s → %s", (word, expected, candidates) => {
    expect(suggest(word, candidates)).toBe(expected);
  });

  it("suggests nothing when nothing is close", () => {
    expect(suggest("grace", ["drainDelay", "timeout"])).toBeUndefined();
    expect(suggest("x", ["port", "host"])).toBeUndefined();
    expect(didYouMean("frobnicate", UPSTREAM_KEYS)).toBe("");
  });

  it("never suggests the word itself", () => {
    expect(suggest("listen", ["listen"])).toBeUndefined();
  });
});
