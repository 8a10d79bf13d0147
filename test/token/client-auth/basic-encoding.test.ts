/**
 * basicEncoding (issue 16): `form` form-encodes id and secret before base64 (RFC 6749 §2.3.1);
 * `raw` does not, for servers that never decode them (old Spring Security OAuth2, golang
 * x/oauth2 AuthStyleInHeaderNoEscape). A server that decodes nothing stands in for those here;
 * when it refuses credentials the encodings treat differently, the error says so.
 */
import { createServer, type Server } from "node:http";
import { Agent } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requestToken } from "../../../src/token/client-credentials.js";
import { makeSpec } from "../helpers.js";

const ID = "app id";
const SECRET = "p@ss+w/rd=é";
let server: Server;
let tokenUrl: string;
const agent = new Agent();
const seenAuthorization: string[] = [];

beforeAll(async () => {
  // Compares the Basic credentials byte for byte, without form-decoding (the old servers' way).
  server = createServer((req, res) => {
    const header = req.headers.authorization ?? "";
    seenAuthorization.push(header);
    const decoded = Buffer.from(header.replace(/^Basic /, ""), "base64").toString("utf8");
    req.resume();
    const ok = decoded === `${ID}:${SECRET}`;
    res.writeHead(ok ? 200 : 401, { "content-type": "application/json" });
    res.end(
      JSON.stringify(
        ok
          ? { access_token: "raw-token", token_type: "Bearer", expires_in: 600 }
          : { error: "invalid_client", error_description: "Bad credentials" },
      ),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  tokenUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}/oauth/token`;
});
afterAll(async () => {
  await agent.close();
  await new Promise((resolve) => server.close(resolve));
});

const credentials = { clientId: ID, clientSecret: SECRET };
const spec = (basicEncoding: "form" | "raw") =>
  makeSpec({ tokenUrl, allowInsecureHttp: true, clientAuth: "basic", basicEncoding });

describe("basicEncoding", () => {
  it("raw sends id:secret as they are, and such a server grants the token", async () => {
    const token = await requestToken(spec("raw"), credentials, {
      dispatcher: agent,
      timeoutMs: 5000,
    });
    expect(token.accessToken).toBe("raw-token");
    expect(seenAuthorization.at(-1)).toBe(
      `Basic ${Buffer.from(`${ID}:${SECRET}`).toString("base64")}`,
    );
  });

  it("form (the default) is refused by such a server, and the error points at basicEncoding, never at the secret alone", async () => {
    const error = (await requestToken(spec("form"), credentials, {
      dispatcher: agent,
      timeoutMs: 5000,
    }).catch((e: unknown) => e)) as Error & { code: string };
    expect(error.code).toBe("BP_ERR_TOKEN_REJECTED");
    expect(error.message).toMatch(
      /client secret contains characters that clientAuth: basic form-encodes .* set upstreams\[\]\.basicEncoding: raw/,
    );
    expect(error.message).not.toContain(SECRET);
    expect(Buffer.from(seenAuthorization.at(-1)!.slice(6), "base64").toString()).toBe(
      "app+id:p%40ss%2Bw%2Frd%3D%C3%A9",
    );
  });

  it("no hint when encoding changes nothing (the secret is simply wrong)", async () => {
    const error = (await requestToken(
      spec("form"),
      { clientId: "plain", clientSecret: "wrong" },
      {
        dispatcher: agent,
        timeoutMs: 5000,
      },
    ).catch((e: unknown) => e)) as Error;
    expect(error.message).not.toMatch(/basicEncoding/);
  });
});
