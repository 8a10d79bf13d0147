/**
 * The whole product with a secretless method (issue 16): config through the real loader,
 * buildApp, a request through the proxy; the token endpoint verifies the private_key_jwt
 * signature and the API sees the token it issued. /status names the method, never the key.
 */
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AppUnderTest, startAppUnderTest } from "../../helpers/app-under-test.js";
import { createTestPki, type TestPki } from "../../helpers/tls.js";
import { makeKeyPair } from "./support.js";
import { startVerifyingEndpoint, type VerifyingEndpoint } from "./verifying-endpoint.js";

let pki: TestPki;
let endpoint: VerifyingEndpoint;
let sut: AppUnderTest | undefined;
const pair = makeKeyPair("ed25519");

beforeAll(async () => {
  pki = await createTestPki();
  endpoint = await startVerifyingEndpoint({
    ...pki.good,
    clients: { "proxy-app": { publicKeyPem: pair.publicPem, keyId: "ed-1" } },
  });
});
afterAll(async () => {
  await sut?.close();
  await endpoint?.close();
});

describe("private-key-jwt through the proxy", () => {
  it("forwards with the token the verifying endpoint issued; /status shows the method only", async () => {
    sut = await startAppUnderTest({
      caPem: pki.caPem,
      files: { "client.key": pair.privatePem },
      config: {
        upstreams: [
          {
            name: "api",
            baseUrl: endpoint.url,
            tokenUrl: endpoint.tokenUrl,
            clientId: "proxy-app",
            clientAuth: "private-key-jwt",
            clientKeyFile: "client.key",
            clientKeyId: "ed-1",
          },
        ],
      },
    });
    const response = await request(`${sut.url}/anything`);
    expect(response.statusCode).toBe(200);
    const echoed = (await response.body.json()) as { authorization: string };
    expect(echoed.authorization).toMatch(/^Bearer at-proxy-app-\d+$/);
    const token = endpoint.seen.find((s) => s.outcome === "granted")!;
    expect(token.jwtHeader).toMatchObject({ alg: "EdDSA", kid: "ed-1" });

    const status = (await (await request(`${sut.adminUrl}/status`)).body.json()) as {
      upstreams: { clientAuth: string }[];
    };
    expect(status.upstreams[0]!.clientAuth).toBe("private-key-jwt");
    const all = `${JSON.stringify(status)}${sut.lines.join("")}`;
    expect(all).not.toContain(pair.privatePem.split("\n")[1]!);
    expect(all).not.toContain(token.fields.client_assertion!);
  });
});
