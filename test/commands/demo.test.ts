/** `bearer-proxy demo` failing to start must not leave its emulator running (the process would hang). */
import { once } from "node:events";
import { createServer, type Server } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { demoCommand } from "../../src/commands/demo.js";
import { freePort } from "../helpers/free-port.js";

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

async function listenOn(port: number): Promise<Server> {
  const server = createServer();
  servers.push(server);
  server.listen(port, "127.0.0.1");
  await Promise.race([
    once(server, "listening"),
    once(server, "error").then(([error]) => Promise.reject(error)),
  ]);
  return server;
}

describe("demo", () => {
  it("stops its emulator when the proxy cannot bind its port", async () => {
    const taken = (await listenOn(0)).address() as { port: number };
    const emulatorPort = await freePort();
    // Reported on stderr as the proxy listener and --port (test/cli/demo.test.ts), exit code 1.
    await expect(
      demoCommand({
        port: String(taken.port),
        "admin-port": "0",
        "emulator-port": String(emulatorPort),
        "log-format": "json",
      }),
    ).resolves.toBe(1);
    // The emulator's port is free again.
    await expect(listenOn(emulatorPort)).resolves.toBeDefined();
  });
});
