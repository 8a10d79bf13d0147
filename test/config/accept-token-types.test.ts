/** Issue 16: `token.acceptTokenTypes` — default, accepted values, and what fails at start. */
import { describe, expect, it } from "vitest";
import { loadConfigWithWarnings } from "../../src/config/load.js";
import { issuesOfText } from "./load-helpers.js";

function upstream(acceptTokenTypes: string): string {
  return `upstreams:\n  - name: api\n    baseUrl: https://api.example.com\n    clientId: id\n    clientSecret: secret\n    token:\n      acceptTokenTypes: ${acceptTokenTypes}\n`;
}

describe("token.acceptTokenTypes", () => {
  it("defaults to [Bearer] and takes a provider's own name", async () => {
    const plain = await loadConfigWithWarnings({
      configText:
        "upstreams:\n  - name: api\n    baseUrl: https://api.example.com\n    clientId: id\n    clientSecret: secret\n",
      env: {},
    });
    expect(plain.config.upstreams[0]!.token.acceptTokenTypes).toEqual(["Bearer"]);
    const apigee = await loadConfigWithWarnings({
      configText: upstream("[Bearer, BearerToken]"),
      env: {},
    });
    expect(apigee.config.upstreams[0]!.token.acceptTokenTypes).toEqual(["Bearer", "BearerToken"]);
  });

  it("refuses DPoP and N_A at start, naming the field and why (DPoP: the dpop setting)", async () => {
    const issues = await issuesOfText(upstream("[Bearer, dpop, N_A]"));
    expect(issues.map((i) => `${i.path}: ${i.message}`)).toEqual([
      'upstreams[0] (api).token.acceptTokenTypes[1]: expected a name for a bearer token such as "Bearer" or "BearerToken", found "dpop": a DPoP token is bound to a key and needs a signed proof on every request (RFC 9449), which bearer-proxy makes only for an upstream with dpop set; set upstreams[].dpop to use DPoP-bound tokens (line 7)',
      'upstreams[0] (api).token.acceptTokenTypes[2]: expected a name for a bearer token such as "Bearer" or "BearerToken", found "N_A": N_A means the issued token is not an access token (RFC 8693 §2.2.1) (line 7)',
    ]);
  });

  it("refuses an empty list and a value with a space", async () => {
    const empty = await issuesOfText(upstream("[]"));
    expect(empty.map((i) => i.path)).toEqual(["upstreams[0] (api).token.acceptTokenTypes"]);
    const spaced = await issuesOfText(upstream('["Bearer Token"]'));
    expect(spaced.map((i) => i.path)).toEqual(["upstreams[0] (api).token.acceptTokenTypes[0]"]);
  });
});
