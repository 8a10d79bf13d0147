/** Sidecar mode: one upstream from BEARER_PROXY_* variables and flags, no config file. */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadConfigWithWarnings } from "../../src/config/load.js";
import { issuesOf, removeTempDirs, tempDir } from "./load-helpers.js";

afterAll(removeTempDirs);

describe("sidecar mode (no file)", () => {
  it("builds one upstream named default from env alone", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "secret"), "s3cret\n");
    const { config, warnings } = await loadConfigWithWarnings({
      cwd: dir,
      env: {
        BEARER_PROXY_BASE_URL: "https://api.example.com/base/",
        BEARER_PROXY_API_VERSION: "scripting-preview",
        BEARER_PROXY_CLIENT_ID: "my-client",
        BEARER_PROXY_CLIENT_SECRET_FILE: "secret",
        BEARER_PROXY_TOKEN_REQUEST_FORMAT: "json",
        BEARER_PROXY_LISTEN: "0.0.0.0:8081",
        BEARER_PROXY_ADMIN_LISTEN: "127.0.0.1:9902",
        BEARER_PROXY_LOG_LEVEL: "debug",
        BEARER_PROXY_LOG_FORMAT: "pretty",
      },
    });
    expect(warnings).toEqual([]);
    expect(config.listen).toEqual({ host: "0.0.0.0", port: 8081 });
    expect(config.admin).toEqual({ host: "127.0.0.1", port: 9902 });
    expect(config.log).toEqual({ level: "debug", format: "pretty" });
    expect(config.upstreams).toHaveLength(1);
    const u = config.upstreams[0]!;
    expect(u.name).toBe("default");
    expect(u.baseUrl).toBe("https://api.example.com/base");
    expect(u.token.tokenUrl).toBe("https://api.example.com/base/oauth2/token");
    expect(u.token.format).toBe("json");
    expect(u.token.clientId).toEqual({ kind: "inline", value: "my-client" });
    // Paths from env and flags are relative to the working directory.
    expect(u.token.clientSecret).toEqual({ kind: "file", path: join(dir, "secret") });
  });

  it("takes flags over env", async () => {
    const { config } = await loadConfigWithWarnings({
      env: {
        BEARER_PROXY_BASE_URL: "https://env.example.com",
        BEARER_PROXY_CLIENT_ID: "a",
        BEARER_PROXY_CLIENT_SECRET: "b",
      },
      flags: { baseUrl: "https://flag.example.com", clientSecretFile: "/etc/hostname" },
    });
    expect(config.upstreams[0]?.baseUrl).toBe("https://flag.example.com");
    expect(config.upstreams[0]?.token.clientSecret).toEqual({
      kind: "file",
      path: "/etc/hostname",
    });
  });

  it("says what to set when there is nothing to proxy", async () => {
    expect(await issuesOf({ env: { BEARER_PROXY_CLIENT_ID: "x" } })).toEqual([
      {
        path: "config",
        message:
          "nothing to proxy: expected a config file (--config or BEARER_PROXY_CONFIG) or an upstream base URL (--base-url or BEARER_PROXY_BASE_URL), found neither",
      },
    ]);
  });

  it("names the variables to set for missing credentials", async () => {
    expect(await issuesOf({ env: { BEARER_PROXY_BASE_URL: "https://api.example.com" } })).toEqual([
      {
        path: "upstreams[0] (default)",
        message:
          "expected exactly one of clientId and clientIdFile, found neither; set BEARER_PROXY_CLIENT_ID or BEARER_PROXY_CLIENT_ID_FILE (flags --client-id, --client-id-file)",
      },
      {
        path: "upstreams[0] (default)",
        message:
          "expected exactly one of clientSecret and clientSecretFile, found neither; set BEARER_PROXY_CLIENT_SECRET or BEARER_PROXY_CLIENT_SECRET_FILE (flags --client-secret, --client-secret-file)",
      },
    ]);
  });

  it("names the variable of a missing secret file", async () => {
    expect(
      await issuesOf({
        cwd: "/nonexistent",
        env: {
          BEARER_PROXY_BASE_URL: "https://api.example.com",
          BEARER_PROXY_CLIENT_ID: "a",
          BEARER_PROXY_CLIENT_SECRET_FILE: "s",
        },
      }),
    ).toEqual([
      {
        path: "env BEARER_PROXY_CLIENT_SECRET_FILE",
        message: "expected a readable file, found nothing at /nonexistent/s",
      },
    ]);
  });

  it("warns that --client-secret is visible to other users", async () => {
    const { warnings } = await loadConfigWithWarnings({
      env: {},
      flags: { baseUrl: "https://api.example.com", clientId: "a", clientSecret: "b" },
    });
    expect(warnings).toEqual([
      "flag --client-secret: other users can read command-line arguments; prefer --client-secret-file or BEARER_PROXY_CLIENT_SECRET",
    ]);
  });

  it("adds the env upstream to a file that only sets shared settings", async () => {
    const { config } = await loadConfigWithWarnings({
      configText: "limits: { maxConnections: 5 }\n",
      env: {
        BEARER_PROXY_BASE_URL: "https://api.example.com",
        BEARER_PROXY_CLIENT_ID: "a",
        BEARER_PROXY_CLIENT_SECRET: "b",
      },
    });
    expect(config.limits.maxConnections).toBe(5);
    expect(config.upstreams.map((u) => u.name)).toEqual(["default"]);
  });
});
