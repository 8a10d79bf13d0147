/**
 * When the token endpoint refuses HTTP Basic credentials that form-encoding changes, the usual
 * "check clientId/clientSecret" misleads: the secret may be right and the encoding wrong (old
 * Spring Security OAuth2 and golang x/oauth2's AuthStyleInHeaderNoEscape do not decode). Say so.
 */
import type { TokenEndpointSpec } from "../../config/types.js";
import { BearerProxyError } from "../../errors.js";
import { encodingMatters } from "./secret-forms.js";
import type { ClientCredentials } from "./types.js";

/** `error`, with the encoding hint added when it applies; otherwise `error` itself. */
export function withEncodingHint(
  error: BearerProxyError,
  spec: TokenEndpointSpec,
  credentials: ClientCredentials,
): BearerProxyError {
  if (
    error.code !== "BP_ERR_TOKEN_REJECTED" ||
    spec.clientAuth !== "basic" ||
    credentials.clientSecret === undefined ||
    !encodingMatters(credentials.clientId, credentials.clientSecret)
  ) {
    return error;
  }
  const other = spec.basicEncoding === "form" ? "raw" : "form";
  return new BearerProxyError(
    error.code,
    `${error.message}; the client id or secret contains characters that form-encoding changes, so if they are right, the server may expect basicEncoding: ${other} (now ${spec.basicEncoding})`,
    {
      cause: error.cause ?? error,
      ...(error.upstream === undefined ? {} : { upstream: error.upstream }),
      ...(error.retryAfterSeconds === undefined
        ? {}
        : { retryAfterSeconds: error.retryAfterSeconds }),
      details: { ...error.details, basicEncoding: spec.basicEncoding, basicEncodingMatters: true },
    },
  );
}
