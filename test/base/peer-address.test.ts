/**
 * A peer's address as the house counts it (src/base/peer-address.ts): IPv4-mapped peers as their
 * IPv4 address; for the failure throttle, an IPv6 peer as its /64 in every spelling inet_ntop
 * and people write.
 */
import { describe, expect, it } from "vitest";
import { addressLabel, throttleKey, unmapIpv4 } from "../../src/base/peer-address.js";

describe("peer addresses", () => {
  it("shows an IPv4-mapped peer as its IPv4 address", () => {
    expect(unmapIpv4("::ffff:10.1.2.3")).toBe("10.1.2.3");
    expect(unmapIpv4("::FFFF:10.1.2.3")).toBe("10.1.2.3");
    expect(addressLabel("::ffff:10.1.2.3")).toBe("addr:10.1.2.3");
    expect(unmapIpv4("2001:db8::1")).toBe("2001:db8::1");
  });

  it.each([
    ["10.1.2.3", "10.1.2.3"],
    ["::ffff:10.1.2.3", "10.1.2.3"],
    ["2001:db8:1:2::a", "2001:db8:1:2::/64"],
    ["2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"],
    ["2001:0DB8:0001:0002:0:0:0:1", "2001:db8:1:2::/64"],
    ["2001:db8::1", "2001:db8:0:0::/64"],
    ["2001:db8::1:2:3:4", "2001:db8:0:0::/64"],
    ["2001:db8:1::2:3:4:5", "2001:db8:1:0::/64"],
    ["::1", "0:0:0:0::/64"],
    ["::", "0:0:0:0::/64"],
    ["fe80::1%eth0", "fe80:0:0:0::/64"],
    ["64:ff9b::192.0.2.33", "64:ff9b:0:0::/64"],
    ["1:2:3:4:5:6:192.0.2.33", "1:2:3:4::/64"],
    ["not an address", "not an address"],
  ])("throttles %s as %s", (address, key) => {
    expect(throttleKey(address)).toBe(key);
  });
});
