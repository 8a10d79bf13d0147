/**
 * `clientAuth: client-assertion-file` (RFC 7521 §4.2 with a JWT someone else signed): typically
 * a Kubernetes projected service-account token used for workload identity federation (Entra
 * workload identity, Keycloak, GCP/AWS). The kubelet rotates the file well before it expires,
 * so it is read before every token request; an expired or malformed one fails here, with the
 * file named, instead of as an opaque invalid_client from the IdP.
 */
import { readFile } from "../../base/async-fs.js";
import { BearerProxyError } from "../../errors.js";
import { type ClientAuth, jwtAssertionParts } from "./client-auth-types.js";
import { decodeJwtPayload } from "./jws.js";

export function clientAssertionFile(file: string): ClientAuth {
  return {
    method: "client-assertion-file",
    async authenticate({ credentials, nowWallMs }) {
      const assertion = await readAssertion(file);
      const payload = decodeJwtPayload(assertion);
      if (!payload) {
        throw new BearerProxyError(
          "BP_ERR_CLIENT_ASSERTION",
          `clientAssertionFile ${file} does not hold a JWT (expected header.payload.signature in base64url)`,
        );
      }
      const exp = payload.exp;
      if (typeof exp !== "number" || !Number.isFinite(exp)) {
        throw new BearerProxyError(
          "BP_ERR_CLIENT_ASSERTION",
          `clientAssertionFile ${file} holds a JWT without a numeric exp claim`,
        );
      }
      const expiresAt = new Date(exp * 1000).toISOString();
      const remainingS = Math.floor(exp - nowWallMs / 1000);
      if (remainingS <= 0) {
        throw new BearerProxyError(
          "BP_ERR_CLIENT_ASSERTION",
          `clientAssertionFile ${file} holds an assertion that expired at ${expiresAt} (${-remainingS} s ago): is the projected token still being rotated?`,
          { details: { assertionExpiredAt: expiresAt } },
        );
      }
      const facts = [
        `client-assertion-file: JWT from ${file}, exp ${expiresAt} (in ${remainingS} s)`,
      ];
      const claims = (["iss", "sub", "aud"] as const)
        .filter((name) => payload[name] !== undefined)
        .map((name) => `${name} ${JSON.stringify(payload[name])}`);
      if (claims.length > 0) facts.push(`assertion ${claims.join(", ")}`);
      return jwtAssertionParts(credentials.clientId, assertion, facts);
    },
  };
}

async function readAssertion(file: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    const code = (error as { code?: string }).code ?? "error";
    throw new BearerProxyError(
      "BP_ERR_CLIENT_ASSERTION",
      `cannot read clientAssertionFile ${file} (${code})`,
      { cause: error },
    );
  }
  const assertion = text.trim();
  if (assertion === "") {
    throw new BearerProxyError("BP_ERR_CLIENT_ASSERTION", `clientAssertionFile ${file} is empty`);
  }
  return assertion;
}
