/**
 * Issue 14, overload protection: past `limits.maxInFlight` a request gets a fast
 * `503 overloaded` with Retry-After, and /readyz fails once refusals have lasted
 * `limits.sustainedOverload`, so a load balancer sends traffic to other replicas.
 */
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type HostileWorld,
  sleep,
  startHostileWorld,
  stillAlive,
  upstreamReached,
} from "./support/hostile-world.js";

let world: HostileWorld;
beforeAll(async () => {
  world = await startHostileWorld({ limits: { maxInFlight: 2, sustainedOverload: "1s" } });
}, 60_000);
afterAll(() => world?.close());

const readyz = async () => {
  const res = await request(`${world.proxy.adminUrl}/readyz`);
  return {
    status: res.statusCode,
    body: (await res.body.json()) as { status: string; conditions?: { name: string }[] },
  };
};

describe("overload", () => {
  it("beyond maxInFlight: fast 503 overloaded; sustained, /readyz fails; then recovers", async () => {
    for (let i = 0; i < 100 && (await readyz()).status !== 200; i++) await sleep(100);
    expect((await readyz()).status).toBe(200);
    const since = world.upstream.requests.length;
    const holders = [0, 1].map(() =>
      request(`http://127.0.0.1:${world.port}/slow-headers/3000`, { headersTimeout: 10_000 }),
    );
    await upstreamReached(world, { pathPrefix: "/slow-headers/", count: 2, since });
    const started = Date.now();
    const refused = await request(`http://127.0.0.1:${world.port}/status/204`);
    const body = (await refused.body.json()) as { error: { code: string } };
    expect(refused.statusCode).toBe(503);
    expect(refused.headers["bearer-proxy-error"]).toBe("overloaded");
    expect(refused.headers["retry-after"]).toBe("1");
    expect(body.error.code).toBe("overloaded");
    expect(Date.now() - started).toBeLessThan(1_000);
    // A burst is not sustained overload.
    expect((await readyz()).status).toBe(200);
    // Refusals for over a second: the replica reports itself unready.
    for (let i = 0; i < 8; i++) {
      await (await request(`http://127.0.0.1:${world.port}/status/204`)).body.dump();
      await sleep(200);
    }
    const unready = await readyz();
    expect(unready.status).toBe(503);
    expect(unready.body.conditions).toContainEqual(expect.objectContaining({ name: "overload" }));
    for (const held of await Promise.all(holders)) await held.body.dump();
    await sleep(1_200);
    expect((await readyz()).status).toBe(200);
    const ok = await request(`http://127.0.0.1:${world.port}/status/204`);
    await ok.body.dump();
    expect(ok.statusCode).toBe(204);
    expect(await stillAlive(world)).toEqual({ pid: world.pid, live: true });
  });
});
