/**
 * Client authentication, one file per method, each a function returning the same `ClientAuth`
 * shape (oauth4webapi `ClientSecretPost` / `ClientSecretBasic` / `PrivateKeyJwt` /
 * `TlsClientAuth`). `createClientAuth` picks the configured one.
 */
import type { TokenEndpointSpec } from "../../config/proxy-config.js";
import { clientAssertionFile } from "./client-assertion-file.js";
import type { ClientAuth } from "./client-auth-types.js";
import { clientSecretBasic } from "./client-secret-basic.js";
import { clientSecretPost } from "./client-secret-post.js";
import { privateKeyJwt } from "./private-key-jwt.js";
import { tlsClientAuth } from "./tls-client-auth.js";

export type * from "./client-auth-types.js";
export { SECRET_METHODS } from "./client-auth-types.js";
export { formEncode, sentSecretForms } from "./secret-forms.js";

/** The configured method; cheap, built per request (it keeps no state). */
export function createClientAuth(spec: TokenEndpointSpec): ClientAuth {
  switch (spec.clientAuth) {
    case "body":
      return clientSecretPost();
    case "basic":
      return clientSecretBasic(spec.basicEncoding);
    case "private-key-jwt":
      if (!spec.privateKeyJwt) throw new TypeError("private-key-jwt without its settings");
      return privateKeyJwt(spec.privateKeyJwt);
    case "client-assertion-file":
      if (!spec.clientAssertionFile) throw new TypeError("client-assertion-file without its file");
      return clientAssertionFile(spec.clientAssertionFile);
    case "tls-client-auth":
      return tlsClientAuth(spec.tls.certFile);
  }
}

/**
 * The files, besides id and secret, whose contents are part of the credential (read with it,
 * re-read and the cached token dropped when they change). Not the assertion file: it rotates
 * by design and is read before every request anyway.
 */
export function keyMaterialFiles(
  spec: Pick<TokenEndpointSpec, "clientAuth" | "privateKeyJwt" | "tls">,
): { key: string | undefined; certificate: string | undefined } {
  if (spec.clientAuth === "private-key-jwt" && spec.privateKeyJwt) {
    return { key: spec.privateKeyJwt.keyFile, certificate: spec.privateKeyJwt.certificateFile };
  }
  if (spec.clientAuth === "tls-client-auth") {
    return { key: spec.tls.keyFile, certificate: spec.tls.certFile };
  }
  return { key: undefined, certificate: undefined };
}
