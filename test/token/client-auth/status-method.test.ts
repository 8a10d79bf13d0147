/**
 * /status names each upstream's client-authentication method (never key, secret or assertion),
 * and with a Redis cache says which credentials' tokens stay local (issue 16).
 */
import { afterEach, describe, expect, it } from "vitest";
import { buildTestAdmin, makeUpstreamConfig, type TestAdmin } from "../../admin/helpers.js";

describe("GET /status: client authentication", () => {
  let admin: TestAdmin | undefined;
  afterEach(async () => {
    await admin?.app.close();
    admin = undefined;
  });

  const upstreams = () => [
    makeUpstreamConfig("jwt", {
      clientSecret: undefined,
      clientAuth: "private-key-jwt",
      clientKeyFile: "/secrets/key.pem",
    }),
    makeUpstreamConfig("federated", {
      clientSecret: undefined,
      clientAuth: "client-assertion-file",
      clientAssertionFile: "/var/run/secrets/tokens/idp-token",
    }),
  ];

  it("shows the method per upstream, and which tokens are not shared through Redis", async () => {
    admin = buildTestAdmin({ upstreams: upstreams(), sharedCacheState: () => "up" });
    const body = (await admin.app.inject({ url: "/status" })).json();
    expect(body.upstreams.map((u: { clientAuth: string }) => u.clientAuth)).toEqual([
      "private-key-jwt",
      "client-assertion-file",
    ]);
    expect(body.upstreams[0]).not.toHaveProperty("tokenNotShared");
    expect(body.upstreams[1].tokenNotShared).toMatch(
      /^client-assertion-file tokens are not shared through Redis/,
    );
  });

  it("says nothing about sharing without a shared cache", async () => {
    admin = buildTestAdmin({ upstreams: upstreams() });
    const body = (await admin.app.inject({ url: "/status" })).json();
    expect(body.upstreams[1]).not.toHaveProperty("tokenNotShared");
  });
});
