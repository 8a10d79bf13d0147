/**
 * The three loopback rules, side by side (issue 31): a listen host and a Host header read the
 * same names differently, and the names say which rule is which. The Host header rule is pinned
 * in full by test/admin/quitquitquit.test.ts, the peer address rule there too.
 */
import { describe, expect, it } from "vitest";
import {
  isLoopbackAddress,
  isLoopbackHostHeader,
  isLoopbackListenHost,
} from "../../src/base/loopback.js";

describe("loopback rules", () => {
  it("a listen host: a loopback address, [::1] or localhost, never with a port", () => {
    for (const host of ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "LocalHost"]) {
      expect(isLoopbackListenHost(host), host).toBe(true);
    }
    for (const host of ["0.0.0.0", "::", "10.0.0.1", "a.localhost", "localhost:8080", "[::2]"]) {
      expect(isLoopbackListenHost(host), host).toBe(false);
    }
  });

  it("a Host header: a port may follow, and *.localhost counts", () => {
    for (const host of ["localhost:8080", "a.localhost", "[::1]:9901", "127.0.0.1:80"]) {
      expect(isLoopbackHostHeader(host), host).toBe(true);
    }
    expect(isLoopbackHostHeader("0.0.0.0")).toBe(false);
  });

  it("a peer address: only an address, never a name", () => {
    expect(isLoopbackAddress("127.0.0.1")).toBe(true);
    expect(isLoopbackAddress("localhost")).toBe(false);
    expect(isLoopbackAddress("[::1]")).toBe(false);
  });
});
