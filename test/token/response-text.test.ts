import { describe, expect, it } from "vitest";
import {
  describeTokenUrl,
  retryAfterSeconds,
  sanitizeIdpText,
} from "../../src/token/response-text.js";

describe("response text helpers", () => {
  it("describeTokenUrl drops userinfo, query and fragment", () => {
    expect(describeTokenUrl("https://u:p@idp.test:8443/oauth2/token?key=secret#x")).toBe(
      "https://idp.test:8443/oauth2/token",
    );
    expect(describeTokenUrl("not a url")).toBe("(invalid token URL)");
  });

  it("sanitizeIdpText strips control characters and truncates", () => {
    expect(sanitizeIdpText("bad\r\nX-Evil: 1\u0000\u009b", 100)).toBe("bad X-Evil: 1");
    expect(sanitizeIdpText("x".repeat(300), 200)).toHaveLength(200);
  });

  it("retryAfterSeconds: delay-seconds, HTTP-date, garbage, and a cap", () => {
    const now = Date.UTC(2026, 0, 1, 0, 0, 0);
    expect(retryAfterSeconds(undefined, now)).toBeUndefined();
    expect(retryAfterSeconds("12", now)).toBe(12);
    expect(retryAfterSeconds(" 0 ", now)).toBe(0);
    expect(retryAfterSeconds(new Date(now + 30_500).toUTCString(), now)).toBe(30);
    expect(retryAfterSeconds(new Date(now - 60_000).toUTCString(), now)).toBe(0);
    expect(retryAfterSeconds("soon", now)).toBeUndefined();
    expect(retryAfterSeconds("-5", now)).toBeUndefined();
    expect(retryAfterSeconds("1.5", now)).toBeUndefined();
    expect(retryAfterSeconds("86400", now)).toBe(300);
  });
});
