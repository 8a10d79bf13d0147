/**
 * The tests' port helper (free-port.ts): ports from below the kernel's ephemeral range, which no
 * `listen(0)` of a parallel test can be handed between the draw and the bind.
 */
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { freePort } from "./free-port.js";

describe.skipIf(process.platform !== "linux")("freePort", () => {
  it("draws bindable ports below the ephemeral range, unlike listen(0)", async () => {
    const low = Number(
      readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").split(/\s+/)[0],
    );
    const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
    for (const port of ports) {
      expect(port).toBeGreaterThan(1_024);
      expect(port).toBeLessThan(low);
    }
    // The control: what the old helper returned lies in the range every listen(0) draws from.
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    expect((server.address() as { port: number }).port).toBeGreaterThanOrEqual(low);
    // And a drawn port is bindable right after.
    const port = ports[0]!;
    await new Promise<void>((r) => server.close(() => r()));
    await new Promise<void>((resolve, reject) => {
      const again = createServer();
      again.once("error", reject);
      again.listen(port, "127.0.0.1", () => again.close(() => resolve()));
    });
  });
});
