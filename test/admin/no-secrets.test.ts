import { afterEach, describe, expect, it } from "vitest";
import { fingerprint } from "../../src/base/fingerprint.js";
import {
  buildTestAdmin,
  makeUpstreamConfig,
  NOW_WALL_MS,
  type TestAdmin,
  validStatus,
} from "./helpers.js";

const CLIENT_SECRET = "s3cr3t-Client-Secret-7f1e";
const TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJkZW1vIn0.leaky-token-value-9c2d";
const OTHER_TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJvdGhlciJ9.second-token-value-41ab";

describe("admin responses never contain a secret or a token", () => {
  let admin: TestAdmin | undefined;
  afterEach(async () => {
    await admin?.app.close();
    admin = undefined;
  });

  it("keeps the client secret and tokens out of every endpoint, even when an IdP echoes the secret", async () => {
    const files = makeUpstreamConfig("files");
    const scripts = makeUpstreamConfig("scripts");
    admin = buildTestAdmin({
      upstreams: [
        {
          ...files,
          token: { ...files.token, clientSecret: { kind: "inline", value: CLIENT_SECRET } },
        },
        {
          ...scripts,
          token: { ...scripts.token, clientSecret: { kind: "inline", value: CLIENT_SECRET } },
        },
      ],
      statuses: {
        files: validStatus(TOKEN),
        // A misbehaving IdP echoed the submitted secret in its error_description.
        scripts: validStatus(OTHER_TOKEN, {
          state: "degraded",
          scope: `files:read ${CLIENT_SECRET}`,
          lastError: {
            code: "BP_ERR_TOKEN_REJECTED",
            message: `answered 401 (invalid_client: bad secret ${CLIENT_SECRET})`,
            atWallMs: NOW_WALL_MS,
          },
        }),
      },
    });
    admin.metrics.requestsTotal.inc({ upstream: "files", method: "GET", status_class: "2xx" });
    admin.metrics.tokenFetchesTotal.inc({ upstream: "files", outcome: "success" });

    const bodies: string[] = [];
    for (const request of [
      { url: "/livez" },
      { url: "/readyz" },
      { url: "/startup" },
      { url: "/metrics" },
      { url: "/status" },
      { url: "/status", headers: { accept: "text/html" } },
      { url: "/status/upstreams/scripts" },
      { url: "/status/upstreams/scripts", headers: { accept: "text/html" } },
      { url: "/nope" },
    ]) {
      const res = await admin.app.inject({ method: "GET", ...request });
      bodies.push(res.body, JSON.stringify(res.headers));
    }
    const everything = bodies.join("\n");
    // The test would be vacuous if the data never reached the output at all.
    expect(everything).toContain(fingerprint(TOKEN));
    expect(everything).toContain(fingerprint(OTHER_TOKEN));
    expect(everything).toContain("invalid_client: bad secret [redacted]");

    for (const secret of [CLIENT_SECRET, TOKEN, OTHER_TOKEN]) {
      expect(everything).not.toContain(secret);
      // Nor a recognisable chunk of it.
      expect(everything).not.toContain(secret.slice(-12));
    }
    expect(admin.logLines.join("")).not.toContain(CLIENT_SECRET);
  });
});
