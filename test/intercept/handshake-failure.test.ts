/**
 * A failed handshake inside a terminated CONNECT, as the metric's `reason` and the one log line
 * (intercept/handshake-failure.ts). Real alerts are read in leaf-certificates.test.ts (curl's
 * unknown_ca); here every mapping and what the line tells the operator.
 */
import { describe, expect, it } from "vitest";
import {
  describeHandshakeFailure,
  handshakeFailureReason,
} from "../../src/intercept/handshake-failure.js";

const CA = { subject: "CN=test interception CA", fingerprintSha256: "AB:CD:EF" };
const withCode = (code: string) => Object.assign(new Error(code), { code });

describe("handshake failures", () => {
  it.each([
    ["ERR_SSL_TLSV1_ALERT_UNKNOWN_CA", "untrusted_ca"], // OpenSSL clients: curl, Python, git
    ["ERR_SSL_SSLV3_ALERT_CERTIFICATE_UNKNOWN", "untrusted_ca"], // Java
    ["ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE", "untrusted_ca"], // Go
    ["ERR_SSL_SSLV3_ALERT_CERTIFICATE_EXPIRED", "expired"],
    ["ERR_TLS_HANDSHAKE_TIMEOUT", "timeout"],
    ["ECONNRESET", "closed"],
    ["ERR_SSL_WRONG_VERSION_NUMBER", "other"],
  ])("reads %s as %s", (code, reason) => {
    expect(handshakeFailureReason(withCode(code))).toBe(reason);
  });

  it("reads a close without an error as closed, and a thrown non-error as other", () => {
    expect(handshakeFailureReason(undefined)).toBe("closed");
    expect(handshakeFailureReason("boom")).toBe("other");
  });

  it("tells which host was refused and which CA the client must trust, and how to get it", () => {
    const line = describeHandshakeFailure("untrusted_ca", "api.example.com", CA);
    expect(line).toBe(
      'client refused the certificate for api.example.com: it must trust the interception CA "CN=test interception CA" (SHA-256 AB:CD:EF), which `bearer-proxy intercept-ca` prints (a client that pins api.example.com\'s own certificate cannot be intercepted)',
    );
    expect(describeHandshakeFailure("closed", "api.example.com", CA)).toContain("SHA-256 AB:CD:EF");
    expect(describeHandshakeFailure("expired", "api.example.com", CA)).toContain("clock");
  });
});
