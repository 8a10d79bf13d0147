/**
 * Issue 14 item 7: every answer the proxy makes itself carries the error contract. Node
 * answered `Expect: <anything but 100-continue>` with a bare 417 (no bearer-proxy-error
 * header, no log line, no metric); now it goes through the handler.
 */
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rawRequest } from "../helpers/raw-http.js";
import { type HostileWorld, logLine, startHostileWorld } from "./support/hostile-world.js";

let world: HostileWorld;
beforeAll(async () => {
  world = await startHostileWorld();
}, 60_000);
afterAll(() => world?.close());

describe("Expect header", () => {
  it("an unknown expectation: 417 expectation_failed with the contract, a log line and the metric", async () => {
    const seen = world.upstream.requests.length;
    const answer = await rawRequest(
      world.port,
      "GET /status/204 HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: teapot\r\n\r\n",
    );
    const res = answer.responses[0]!;
    expect(res.status).toBe(417);
    expect(res.headers.get("bearer-proxy-error")).toEqual(["expectation_failed"]);
    expect(res.headers.get("content-type")).toEqual(["application/json"]);
    expect(JSON.parse(res.body).error.code).toBe("expectation_failed");
    expect(world.upstream.requests.length).toBe(seen);
    const line = await logLine(world, (l) => l.msg === "request" && l.status === 417);
    expect(line.errorCode).toBe("expectation_failed");
    const metrics = await (await request(`${world.proxy.adminUrl}/metrics`)).body.text();
    expect(metrics).toMatch(/bearer_proxy_errors_total\{[^}]*code="expectation_failed"[^}]*\} 1/);
  });

  it("Expect: 100-continue still works", async () => {
    const answer = await rawRequest(
      world.port,
      "POST /echo/continue HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
    );
    expect(answer.responses.map((r) => r.status)).toContain(200);
  });
});
