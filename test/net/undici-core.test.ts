import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import * as undici from "undici";
import { describe, expect, it } from "vitest";
import {
  Agent,
  buildConnector,
  Dispatcher,
  ProxyAgent,
  request,
} from "../../src/net/undici-core.js";

/** src/net/undici-core.ts loads undici's parts without its index: they must be the index's own. */
describe("undici-core", () => {
  it("exports the very classes undici's index exports (a release that moves them fails here)", () => {
    expect(Agent).toBe(undici.Agent);
    expect(ProxyAgent).toBe(undici.ProxyAgent);
    expect(buildConnector).toBe(undici.buildConnector);
    expect(Dispatcher).toBe(undici.Dispatcher);
    expect(typeof new Agent().request).toBe("function");
  });

  it("request() sends method, path and query to the URL's origin through the given dispatcher", async () => {
    const seen: string[] = [];
    const server = createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      res.end("ok");
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const { port } = server.address() as AddressInfo;
    const agent = new Agent();
    try {
      const response = await request(`http://127.0.0.1:${port}/a/b?c=d`, {
        method: "POST",
        body: "x",
        dispatcher: agent,
      });
      expect(response.statusCode).toBe(200);
      expect(await response.body.text()).toBe("ok");
      const plain = await request(new URL(`http://127.0.0.1:${port}/plain`), { dispatcher: agent });
      await plain.body.dump();
      expect(seen).toEqual(["POST /a/b?c=d", "GET /plain"]);
    } finally {
      await agent.close();
      server.close();
    }
  });
});
