import { readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { useEmulator } from "../helpers/emulator.js";
import {
  freePort,
  httpCall,
  logRecords,
  useBusyPort,
  useCliProcesses,
  useTempDir,
  waitUntilReady,
} from "./helpers.js";

const SECRET = "run-cmd-secret-5e1b9c";

describe("bearer-proxy run", () => {
  const emulator = useEmulator({ clients: [{ clientId: "run-client", clientSecret: SECRET }] });
  // The blocks below run their tests concurrently: every child is killed after the file.
  const cli = useCliProcesses({ cleanup: "afterAll" });
  const dir = useTempDir("bp-cli-run-");
  const busyPort = useBusyPort();

  /** The one-upstream sidecar environment, no file. */
  function sidecarEnv(overrides: Record<string, string> = {}): Record<string, string> {
    const secretFile = join(dir(), "client_secret");
    writeFileSync(secretFile, `${SECRET}\n`);
    return {
      BEARER_PROXY_BASE_URL: emulator().url,
      BEARER_PROXY_CLIENT_ID: "run-client",
      BEARER_PROXY_CLIENT_SECRET_FILE: secretFile,
      BEARER_PROXY_CA_FILE: emulator().caFile,
      BEARER_PROXY_LISTEN: "127.0.0.1:0",
      BEARER_PROXY_ADMIN_LISTEN: "127.0.0.1:0",
      ...overrides,
    };
  }

  describe.concurrent("serving", () => {
    it("runs from the environment alone and forwards a request with a token", async () => {
      const proc = cli.start(["run"], { env: sidecarEnv() });
      const { proxyUrl, adminUrl } = await proc.ports();
      await waitUntilReady(adminUrl);
      const response = await httpCall(`${proxyUrl}/platform/v1/spreadsheets/env-only`);
      expect(response.status).toBe(200);
      expect(JSON.parse(response.body)).toMatchObject({ id: "env-only" });

      // One announcement per upstream: name, base URL, version and token endpoint.
      const announced = logRecords(proc.stdout()).filter(
        (r) => typeof r.upstream === "string" && r.tokenUrl,
      );
      expect(announced).toHaveLength(1);
      expect(announced[0]).toMatchObject({
        upstream: "default",
        baseUrl: emulator().url,
        apiVersion: "default",
        tokenUrl: `${emulator().url}/iam/v1/oauth2/token`,
        msg: `upstream default: ${emulator().url} (version default), token endpoint ${emulator().url}/iam/v1/oauth2/token`,
      });
      expect(proc.output()).not.toContain(SECRET);
    });

    it("lets a flag win over the environment (--listen over BEARER_PROXY_LISTEN)", async () => {
      // The env names a port that is taken: the proxy can only start if the flag wins.
      const env = sidecarEnv({ BEARER_PROXY_LISTEN: `127.0.0.1:${busyPort()}` });
      const proc = cli.start(["run", "--listen", "127.0.0.1:0"], { env });
      const { proxyUrl, adminUrl } = await proc.ports();
      expect(proxyUrl).not.toBe(`http://127.0.0.1:${busyPort()}`);
      await waitUntilReady(adminUrl);
      expect((await httpCall(`${proxyUrl}/platform/v1/spreadsheets/flags`)).status).toBe(200);
    });

    it("announces one line per upstream of a config file, then serves both versions", async () => {
      const file = join(dir(), "two-versions.yaml");
      const ca = JSON.stringify(emulator().caFile);
      writeFileSync(
        file,
        `listen: { host: 127.0.0.1, port: 0 }
admin: { host: 127.0.0.1, port: 0 }
upstreams:
  - name: platform
    baseUrl: ${emulator().url}
    clientId: run-client
    clientSecret: \${RUN_SECRET}
    tls: { caFile: ${ca} }
    match: { pathPrefix: /platform/ }
  - name: scripting
    baseUrl: ${emulator().url}
    apiVersion: scripting-preview
    tokenRequestFormat: json
    clientId: run-client
    clientSecret: \${RUN_SECRET}
    tls: { caFile: ${ca} }
    match: { pathPrefix: /scripts }
`,
      );
      const proc = cli.start(["run", "--config", file], { env: { RUN_SECRET: SECRET } });
      const { proxyUrl, adminUrl } = await proc.ports();
      const url = emulator().url;
      const announced = logRecords(proc.stdout())
        .filter((r) => String(r.msg).startsWith("upstream "))
        .map((r) => r.msg);
      expect(announced).toEqual([
        `upstream platform: ${url} (version default), token endpoint ${url}/iam/v1/oauth2/token`,
        `upstream scripting: ${url} (version scripting-preview), token endpoint ${url}/oauth2/token`,
      ]);
      await waitUntilReady(adminUrl);
      expect((await httpCall(`${proxyUrl}/platform/v1/spreadsheets/a`)).status).toBe(200);
      expect((await httpCall(`${proxyUrl}/scripts`)).status).toBe(200);
      expect(proc.output()).not.toContain(SECRET);
    });
  });

  describe.concurrent("refusing to start", () => {
    it("exits 1 on a bad configuration, naming every problem, without starting", async () => {
      const { code, stdout, stderr } = await cli.run(["run"], {
        env: sidecarEnv({
          BEARER_PROXY_BASE_URL: "http://127.0.0.1:1",
          BEARER_PROXY_LISTEN: "nonsense",
        }),
      });
      expect(code).toBe(1);
      expect(stdout).not.toContain("proxyPorts");
      expect(stderr).toContain("invalid configuration (2 problems)");
      expect(stderr).toContain(
        'env BEARER_PROXY_LISTEN: expected host:port such as "0.0.0.0:8080"',
      );
      expect(stderr).toContain(
        'env BEARER_PROXY_BASE_URL: expected an https:// URL, found "http://127.0.0.1:1"',
      );
    });

    it("exits 1 with nothing to proxy in an empty environment", async () => {
      const { code, stderr } = await cli.run(["run"]);
      expect(code).toBe(1);
      expect(stderr).toContain("nothing to proxy");
      expect(stderr).toContain("BEARER_PROXY_BASE_URL");
    });

    for (const which of ["proxy", "admin"] as const) {
      it(`fails fast on an unbindable ${which} port: names the address, no stack trace`, async () => {
        const taken = `127.0.0.1:${busyPort()}`;
        // The other listener gets a fixed free port, so the test can see whether it was left open.
        const other = `127.0.0.1:${await freePort()}`;
        const env = sidecarEnv(
          which === "proxy"
            ? { BEARER_PROXY_LISTEN: taken, BEARER_PROXY_ADMIN_LISTEN: other }
            : { BEARER_PROXY_LISTEN: other, BEARER_PROXY_ADMIN_LISTEN: taken },
        );
        const proc = cli.start(["run"], { env });
        await proc.waitForOutput(/cannot start/);
        // Once it has said it cannot start, nothing may still listen (an open listener keeps the
        // process up until cli.ts's 2 s safety exit, and answers connections meanwhile). Asked
        // of the child's own sockets: a connect to `other` could reach another test that bound
        // the port since it was free.
        if (LINUX)
          expect(listeningPorts(proc.child.pid!)).not.toContain(Number(other.split(":")[1]));
        const { code } = await proc.exited;
        const exitedAtWallMs = Date.now();
        expect(code).toBe(1);
        // The child's own timestamp of the fatal line: a slow test host delays what this process
        // sees, never the child's clock, so a 2 s linger always shows.
        const fatal = logRecords(proc.stdout()).find((r) => r.level === "fatal");
        expect(fatal).toMatchObject({
          code: "BP_ERR_LISTEN",
          listener: which,
          address: taken,
          reason: "EADDRINUSE",
        });
        expect(exitedAtWallMs - Date.parse(String(fatal?.time))).toBeLessThan(1_500);
        // Issue 32: which listener, which address, and what moves it (key, variable, flag).
        const move =
          which === "proxy"
            ? "listen in the config file, BEARER_PROXY_LISTEN=HOST:PORT or --listen HOST:PORT"
            : "admin in the config file, BEARER_PROXY_ADMIN_LISTEN=HOST:PORT or --admin-listen HOST:PORT";
        expect(proc.stderr()).toBe(
          `bearer-proxy: cannot start: the ${which} listener cannot listen on ${taken}: the address is already in use (another process listens there); move it with ${move}\n`,
        );
        expect(proc.output()).not.toMatch(/^\s+at /m);
        expect(proc.stdout()).not.toContain("proxyPorts");
      });
    }

    it("names an upstream's own listener by its config key when its port is taken", async () => {
      const file = join(dir(), "own-listener.yaml");
      const upstream = (name: string, extra: string) => `  - name: ${name}
    baseUrl: ${emulator().url}
    clientId: run-client
    clientSecret: ${SECRET}
    tls: { caFile: ${JSON.stringify(emulator().caFile)} }
${extra}`;
      writeFileSync(
        file,
        `listen: { host: 127.0.0.1, port: 0 }
admin: { host: 127.0.0.1, port: 0 }
upstreams:
${upstream("first", "")}${upstream("reports", `    listen: { host: 127.0.0.1, port: ${busyPort()} }\n`)}`,
      );
      const { code, stderr } = await cli.run(["run", "--config", file]);
      expect(code).toBe(1);
      expect(stderr).toBe(
        `bearer-proxy: cannot start: the listener of upstream reports cannot listen on 127.0.0.1:${busyPort()}: the address is already in use (another process listens there); move it with upstreams[1].listen in the config file\n`,
      );
    });
  });
});

/** listeningPorts reads /proc: the listener check runs on Linux (CI, the image) only. */
const LINUX = process.platform === "linux";

/**
 * TCP ports process `pid` listens on now (Linux: its socket fds matched against the kernel's
 * table of listening sockets); none once it has exited.
 */
function listeningPorts(pid: number): number[] {
  const inodes = new Set<string>();
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      const target = (() => {
        try {
          return readlinkSync(`/proc/${pid}/fd/${fd}`);
        } catch {
          return "";
        }
      })();
      const match = /^socket:\[(\d+)\]$/.exec(target);
      if (match) inodes.add(match[1]!);
    }
  } catch {
    return []; // exited
  }
  const ports: number[] = [];
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    for (const line of readFileSync(table, "utf8").split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      // local_address is HEX_IP:HEX_PORT, st 0A is LISTEN, inode is the 10th field.
      if (fields[3] === "0A" && inodes.has(fields[9]!))
        ports.push(Number.parseInt(fields[1]!.split(":")[1]!, 16));
    }
  }
  return ports;
}

describe.skipIf(!LINUX)("listeningPorts (the check above)", () => {
  it("sees a listener of this process, and not once it is closed", async () => {
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const { port } = server.address() as { port: number };
    expect(listeningPorts(process.pid)).toContain(port);
    await new Promise<void>((r) => server.close(() => r()));
    expect(listeningPorts(process.pid)).not.toContain(port);
  });
});
