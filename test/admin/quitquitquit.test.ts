import { afterEach, describe, expect, it } from "vitest";
import { isLoopbackAddress } from "../../src/admin/loopback.js";
import { buildTestAdmin, type TestAdmin } from "./helpers.js";

describe("POST /quitquitquit", () => {
  let admin: TestAdmin | undefined;
  afterEach(async () => {
    await admin?.app.close();
    admin = undefined;
  });

  it.each(["127.0.0.1", "127.3.2.1", "::1", "::ffff:127.0.0.1"])(
    "accepts %s with 202 and quits after answering",
    async (remoteAddress) => {
      admin = buildTestAdmin();
      const res = await admin.app.inject({ method: "POST", url: "/quitquitquit", remoteAddress });
      expect(res.statusCode).toBe(202);
      expect(res.json()).toEqual({ status: "quitting" });
      await new Promise((resolve) => setImmediate(resolve));
      expect(admin.quitCalls()).toBe(1);
    },
  );

  it.each(["10.0.0.7", "192.168.1.2", "::ffff:10.0.0.7", "fe80::1", "128.0.0.1"])(
    "refuses %s with 403 and does not quit",
    async (remoteAddress) => {
      admin = buildTestAdmin();
      const res = await admin.app.inject({
        method: "POST",
        url: "/quitquitquit",
        remoteAddress,
        // A forged header must not make a remote caller look local.
        headers: { "x-forwarded-for": "127.0.0.1" },
      });
      expect(res.statusCode).toBe(403);
      expect(res.json().error.code).toBe("forbidden");
      await new Promise((resolve) => setImmediate(resolve));
      expect(admin.quitCalls()).toBe(0);
      expect(admin.logLines.join("")).toContain("refused /quitquitquit");
    },
  );

  it("calls onQuit once however often it is asked", async () => {
    admin = buildTestAdmin();
    for (let i = 0; i < 3; i++) {
      const res = await admin.app.inject({
        method: "POST",
        url: "/quitquitquit",
        remoteAddress: "127.0.0.1",
      });
      expect(res.statusCode).toBe(202);
    }
    await new Promise((resolve) => setImmediate(resolve));
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
