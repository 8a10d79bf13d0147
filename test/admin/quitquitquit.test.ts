import { afterEach, describe, expect, it } from "vitest";
import { isLoopbackAddress, isLoopbackHostHeader } from "../../src/base/loopback.js";
import { buildTestAdmin, type TestAdmin } from "./helpers.js";

/** What `curl -X POST -H 'content-type: application/json' http://localhost:9901/…` sends. */
const JSON_REQUEST = { "content-type": "application/json", host: "localhost:9901" };

/** The admin server quits after answering: let that turn come before counting quits. */
const afterAnswer = () => new Promise((resolve) => setImmediate(resolve));

describe("POST /quitquitquit", () => {
  let admin: TestAdmin | undefined;
  afterEach(async () => {
    await admin?.app.close();
    admin = undefined;
  });

  /** POST /quitquitquit to this test's admin server as `remoteAddress` would. */
  function postQuit(remoteAddress: string, headers: Record<string, string>, payload?: string) {
    return admin!.app.inject({
      method: "POST",
      url: "/quitquitquit",
      remoteAddress,
      headers,
      ...(payload === undefined ? {} : { payload }),
    });
  }

  it.each(["127.0.0.1", "127.3.2.1", "::1", "::ffff:127.0.0.1"])(
    "accepts %s with 202 and quits after answering",
    async (remoteAddress) => {
      admin = buildTestAdmin();
      const res = await postQuit(remoteAddress, JSON_REQUEST);
      expect(res.statusCode).toBe(202);
      expect(res.json()).toEqual({ status: "quitting" });
      await afterAnswer();
      expect(admin.quitCalls()).toBe(1);
    },
  );

  it.each(["10.0.0.7", "192.168.1.2", "::ffff:10.0.0.7", "fe80::1", "128.0.0.1"])(
    "refuses %s with 403 and does not quit",
    async (remoteAddress) => {
      admin = buildTestAdmin();
      // A forged header must not make a remote caller look local.
      const res = await postQuit(remoteAddress, {
        ...JSON_REQUEST,
        "x-forwarded-for": "127.0.0.1",
      });
      expect(res.statusCode).toBe(403);
      expect(res.json().error.code).toBe("forbidden");
      await afterAnswer();
      expect(admin.quitCalls()).toBe(0);
      expect(admin.logLines.join("")).toContain("refused /quitquitquit");
    },
  );

  // Issue 14, defect 6: a web page on the same laptop must not be able to stop the proxy.
  it.each([
    ["a cross-origin fetch (Origin header)", { ...JSON_REQUEST, origin: "https://evil.example" }],
    ["even a same-site Origin", { ...JSON_REQUEST, origin: "http://localhost:9901" }],
    ["a null Origin (sandboxed page)", { ...JSON_REQUEST, origin: "null" }],
    ["a DNS-rebinding Host", { ...JSON_REQUEST, host: "rebind.evil.example:9901" }],
    ["a Host that only starts like localhost", { ...JSON_REQUEST, host: "localhost.evil.example" }],
    ["a form POST", { "content-type": "application/x-www-form-urlencoded" }],
    ["a text/plain POST", { "content-type": "text/plain" }],
    ["a multipart form POST", { "content-type": "multipart/form-data; boundary=x" }],
    ["a POST with no content type", {}],
  ])("refuses %s from loopback with 403 and does not quit", async (_case, headers) => {
    admin = buildTestAdmin();
    const res = await postQuit("127.0.0.1", headers as Record<string, string>);
    expect(res.statusCode).toBe(403);
    expect(res.json().error.code).toBe("forbidden");
    await afterAnswer();
    expect(admin.quitCalls()).toBe(0);
  });

  it.each(["localhost", "localhost:9901", "127.0.0.1:9901", "[::1]:9901", "app.localhost"])(
    "accepts the loopback Host %s",
    async (host) => {
      admin = buildTestAdmin();
      const res = await postQuit("127.0.0.1", { ...JSON_REQUEST, host });
      expect(res.statusCode).toBe(202);
    },
  );

  it("a JSON body, or an empty one, is fine; a broken one is a 400", async () => {
    admin = buildTestAdmin();
    const send = (payload: string) => postQuit("127.0.0.1", JSON_REQUEST, payload);
    expect((await send("{not json")).statusCode).toBe(400);
    expect((await send("")).statusCode).toBe(202);
    expect((await send("{}")).statusCode).toBe(202);
  });

  it("calls onQuit once however often it is asked", async () => {
    admin = buildTestAdmin();
    for (let i = 0; i < 3; i++) {
      const res = await postQuit("127.0.0.1", { "x-requested-with": "curl" });
      expect(res.statusCode).toBe(202);
    }
    await afterAnswer();
    expect(admin.quitCalls()).toBe(1);
  });

  it("is POST only", async () => {
    admin = buildTestAdmin();
    const res = await admin.app.inject({
      method: "GET",
      url: "/quitquitquit",
      remoteAddress: "127.0.0.1",
    });
    expect(res.statusCode).toBe(404);
    expect(admin.quitCalls()).toBe(0);
  });

  it("recognises loopback Host values and nothing else", () => {
    for (const host of [
      "localhost",
      "LOCALHOST:1",
      "a.localhost",
      "127.0.0.1",
      "127.9.9.9:80",
      "[::1]:9901",
    ]) {
      expect(isLoopbackHostHeader(host), host).toBe(true);
    }
    for (const host of [
      undefined,
      "",
      "localhost.evil",
      "evil-localhost",
      "127.0.0.1.nip.io",
      "10.0.0.1",
      "[::2]",
    ]) {
      expect(isLoopbackHostHeader(host), String(host)).toBe(false);
    }
  });

  it("recognises loopback addresses and nothing else", () => {
    expect(isLoopbackAddress("127.255.255.254")).toBe(true);
    expect(isLoopbackAddress("::FFFF:127.0.0.1")).toBe(true);
    expect(isLoopbackAddress("0:0:0:0:0:0:0:1")).toBe(true);
    for (const address of [
      undefined,
      "",
      "localhost",
      "127.0.0",
      "::2",
      "::ffff:128.0.0.1",
      "1.127.0.0",
    ]) {
      expect(isLoopbackAddress(address)).toBe(false);
    }
  });
});
