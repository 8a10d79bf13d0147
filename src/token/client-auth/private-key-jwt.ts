/**
 * `clientAuth: private-key-jwt` (RFC 7523 §2.2, RFC 7521 §4.2, OIDC `private_key_jwt`): a
 * short-lived JWT signed with the client's private key replaces the secret. Key and certificate
 * come from the credential reader (re-read when their files change); the key is parsed on every
 * request, which costs well under a millisecond for a request made every few minutes.
 */
import { type KeyObject, randomUUID, X509Certificate } from "node:crypto";
import { describeKey, parsePrivateKeyPem, signingAlgorithm } from "../../base/private-key.js";
import type { AssertionAlgorithm, PrivateKeyJwtSpec } from "../../config/proxy-config.js";
import { BearerProxyError } from "../../errors.js";
import { type ClientAuth, jwtAssertionParts } from "./client-auth-types.js";
import { certificateThumbprint, signJws } from "./jws.js";

/** RFC 7521 §4.2 / RFC 7523 §2.2. */

export function privateKeyJwt(spec: PrivateKeyJwtSpec): ClientAuth {
  return {
    method: "private-key-jwt",
    async authenticate({ credentials, tokenUrl, nowWallMs }) {
      const key = parsePrivateKeyPem(credentials.clientKeyPem, `clientKeyFile ${spec.keyFile}`);
      const algorithm = chooseAlgorithm(key, spec);
      const header: Record<string, unknown> = { alg: algorithm, typ: "JWT" };
      if (spec.keyId !== undefined) header.kid = spec.keyId;
      const facts = [
        `private-key-jwt: ${algorithm} with the ${describeKey(key)} key in ${spec.keyFile}`,
      ];
      if (spec.keyId !== undefined) facts.push(`kid ${JSON.stringify(spec.keyId)}`);
      if (spec.certificateFile !== undefined) {
        const certificate = parseCertificate(credentials.clientCertificatePem, spec);
        if (!certificate.checkPrivateKey(key)) {
          throw new BearerProxyError(
            "BP_ERR_CLIENT_KEY",
            `clientCertificateFile ${spec.certificateFile} is not the certificate of the key in clientKeyFile ${spec.keyFile}`,
          );
        }
        header["x5t#S256"] = certificateThumbprint(certificate);
        facts.push(
          `x5t#S256 ${header["x5t#S256"]} (certificate ${certificate.subject.replace(/\n/g, ", ")}, valid to ${new Date(certificate.validTo).toISOString()})`,
        );
      }
      const issuedAt = Math.floor(nowWallMs / 1000);
      const lifetimeSeconds = Math.max(1, Math.round(spec.lifetimeMs / 1000));
      const audience = spec.audience ?? tokenUrl;
      const payload = {
        iss: credentials.clientId,
        sub: credentials.clientId,
        aud: audience,
        // Unique per assertion: RFC 7523 §3 lets servers refuse a replayed jti.
        jti: randomUUID(),
        iat: issuedAt,
        nbf: issuedAt,
        exp: issuedAt + lifetimeSeconds,
      };
      const assertion = signJws(header, payload, key, algorithm);
      facts.push(
        `assertion aud ${JSON.stringify(audience)}, exp ${new Date(payload.exp * 1000).toISOString()} (${lifetimeSeconds} s)`,
      );
      return jwtAssertionParts(credentials.clientId, assertion, facts);
    },
  };
}

function chooseAlgorithm(key: KeyObject, spec: PrivateKeyJwtSpec): AssertionAlgorithm {
  const chosen = signingAlgorithm(key, spec.algorithm, "an assertion");
  if (chosen.problem !== undefined) {
    throw new BearerProxyError(
      "BP_ERR_CLIENT_KEY",
      `clientKeyFile ${spec.keyFile}: ${chosen.problem} (supported: RS256, PS256 with RSA ≥ 2048 bits, ES256 with P-256, EdDSA with Ed25519)`,
    );
  }
  return chosen.algorithm;
}

function parseCertificate(pem: string | undefined, spec: PrivateKeyJwtSpec): X509Certificate {
  try {
    if (pem === undefined) throw new Error("nothing read");
    return new X509Certificate(pem);
  } catch (error) {
    throw new BearerProxyError(
      "BP_ERR_CLIENT_KEY",
      `clientCertificateFile ${spec.certificateFile} does not hold a PEM certificate (${(error as Error).message})`,
      { cause: error },
    );
  }
}
