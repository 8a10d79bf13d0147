/**
 * `clientAuth: tls-client-auth` (RFC 8705 §2): the client certificate of the TLS connection
 * authenticates the client; the request carries only `client_id`. The certificate itself is
 * presented by the token endpoint's dispatcher (`tokenTls`, see net/dispatcher.ts), which
 * re-reads certificate and key when they change; here it is only described for `check`.
 */
import { X509Certificate } from "node:crypto";
import type { ClientAuth } from "./client-auth-types.js";

export function tlsClientAuth(certificateFile: string | undefined): ClientAuth {
  return {
    method: "tls-client-auth",
    async authenticate({ credentials }) {
      const facts = [
        `tls-client-auth: client certificate ${certificateFile ?? "(none configured)"}`,
      ];
      const pem = credentials.clientCertificatePem;
      if (pem !== undefined) {
        try {
          const certificate = new X509Certificate(pem);
          facts.push(
            `certificate ${certificate.subject.replace(/\n/g, ", ")}, issuer ${certificate.issuer.replace(/\n/g, ", ")}, valid to ${new Date(certificate.validTo).toISOString()}`,
          );
        } catch {
          facts.push("the certificate file does not parse (the TLS handshake will fail)");
        }
      }
      return {
        fields: [["client_id", credentials.clientId]],
        headers: {},
        sentSecrets: [],
        facts,
      };
    },
  };
}
