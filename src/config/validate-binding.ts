/**
 * Certificate-bound tokens (RFC 8705 §3): an authorization server may bind a token requested
 * with `clientAuth: tls-client-auth` to the client certificate of that request (`tokenTls`);
 * the resource server then accepts it only over a connection presenting the same certificate
 * (`tls`). A warning, not a problem: many authorization servers authenticate by certificate
 * without binding, and then any `tls` works.
 */
import { X509Certificate } from "node:crypto";
import { readFile } from "../base/async-fs.js";
import { type IssueList, type IssuePath, isObject } from "./issues.js";
import { type PathContext, resolveFilePath } from "./normalize.js";

const WARNING =
  "tokens bound to the tokenTls certificate (RFC 8705) will be refused upstream unless tls presents the same certificate";

/** Warn for each tls-client-auth upstream whose `tls` would present another certificate. */
export async function validateBinding(
  doc: Record<string, unknown>,
  ctx: PathContext,
  issues: IssueList,
): Promise<void> {
  const upstreams = Array.isArray(doc.upstreams) ? doc.upstreams : [];
  await Promise.all(
    upstreams.map((u, i) =>
      isObject(u) ? checkUpstream(u, ["upstreams", i], ctx, issues) : undefined,
    ),
  );
}

async function checkUpstream(
  u: Record<string, unknown>,
  at: IssuePath,
  ctx: PathContext,
  issues: IssueList,
): Promise<void> {
  // Without tokenTls the token endpoint is reached with `tls` too: one certificate for both.
  if (u.clientAuth !== "tls-client-auth" || !isObject(u.tokenTls)) return;
  const tokenCert = u.tokenTls.certFile;
  if (typeof tokenCert !== "string" || tokenCert === "") return; // checkClientAuth reports it
  const tokenPath = resolveFilePath([...at, "tokenTls", "certFile"], tokenCert, ctx);
  const tls = isObject(u.tls) ? u.tls : undefined;
  const upstreamCert = tls?.certFile;
  if (typeof upstreamCert !== "string" || upstreamCert === "") {
    issues.warn(
      [...at, "tls"],
      `${WARNING}; found ${tls === undefined ? "no tls" : "tls without certFile"} (no client certificate upstream), tokenTls.certFile ${tokenPath}`,
    );
    return;
  }
  const upstreamPath = resolveFilePath([...at, "tls", "certFile"], upstreamCert, ctx);
  if (upstreamPath === tokenPath || (await sameCertificate(upstreamPath, tokenPath))) return;
  issues.warn(
    [...at, "tls", "certFile"],
    `${WARNING}; found tls.certFile ${upstreamPath}, tokenTls.certFile ${tokenPath}`,
  );
}

/**
 * True when both files hold the same (first) certificate: one Secret mounted twice is not a
 * mismatch. Unreadable files count as different; the file checks report them.
 */
async function sameCertificate(a: string, b: string): Promise<boolean> {
  try {
    const [first, second] = await Promise.all([a, b].map((file) => readFile(file)));
    return new X509Certificate(first!).raw.equals(new X509Certificate(second!).raw);
  } catch {
    return false;
  }
}
