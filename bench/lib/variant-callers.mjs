/**
 * The caller-authorization variants (issue 23): bearer-proxy with an `allow` rule that names a
 * caller, and wrk presenting that caller's credential on every request. Both write their
 * credential store into the bench's temporary directory, as an operator would: an htpasswd file
 * with a bcrypt hash, a cluster JWKS file and a token signed with its key.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import bcrypt from "bcryptjs";
import { exportJWK, generateKeyPair, SignJWT } from "jose";

/** What `htpasswd -B` writes by default, and what a real users file holds. */
const BCRYPT_COST = 10;
const SA_ISSUER = "https://kubernetes.default.svc.cluster.local";
const SA_NAMESPACE = "bench";
const SA_NAME = "client";
/** The audience `callers.kubernetes.audiences` defaults to. */
const SA_AUDIENCE = "bearer-proxy";

/** Add `allow` to the one upstream and `callers` at the top of a plain bench config. */
function withCallers(config, callers, allow) {
  return {
    ...config,
    callers,
    upstreams: config.upstreams.map((upstream) => ({ ...upstream, allow })),
  };
}

/** `callers.basic` with a bcrypt user; the client sends `Proxy-Authorization: Basic`. */
export async function prepareCallersBasic({ dir }) {
  const user = "bench";
  const password = randomBytes(12).toString("base64url");
  const usersFile = join(dir, "callers-basic.htpasswd");
  await writeFile(usersFile, `${user}:${await bcrypt.hash(password, BCRYPT_COST)}\n`, {
    mode: 0o644,
  });
  return {
    configure: (config) => withCallers(config, { basic: { usersFile } }, [{ user }]),
    headers: {
      "Proxy-Authorization": `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`,
    },
    withoutHeaders: 407,
  };
}

/**
 * `callers.kubernetes` with a JWKS file; the client sends a projected service-account token
 * (the claims the API server writes: `sub`, `aud`, `exp`, `kubernetes.io`) as
 * `Proxy-Authorization: Bearer`.
 */
export async function prepareCallersServiceAccount({ dir }) {
  const { publicKey, privateKey } = await generateKeyPair("ES256", { extractable: true });
  const kid = randomUUID();
  const jwksFile = join(dir, "callers-sa.jwks.json");
  const jwk = { ...(await exportJWK(publicKey)), kid, alg: "ES256", use: "sig" };
  await writeFile(jwksFile, `${JSON.stringify({ keys: [jwk] })}\n`, { mode: 0o644 });
  const token = await new SignJWT({
    "kubernetes.io": {
      namespace: SA_NAMESPACE,
      serviceaccount: { name: SA_NAME, uid: randomUUID() },
    },
  })
    .setProtectedHeader({ alg: "ES256", kid, typ: "JWT" })
    .setIssuer(SA_ISSUER)
    .setSubject(`system:serviceaccount:${SA_NAMESPACE}:${SA_NAME}`)
    .setAudience(SA_AUDIENCE)
    .setIssuedAt()
    .setNotBefore("0s")
    // Longer than any run (the full bench takes ~15 min): the proxy caches until `exp`.
    .setExpirationTime("1h")
    .sign(privateKey);
  return {
    configure: (config) =>
      withCallers(config, { kubernetes: { issuer: SA_ISSUER, jwksFile } }, [
        { serviceAccount: `${SA_NAMESPACE}/${SA_NAME}` },
      ]),
    headers: { "Proxy-Authorization": `Bearer ${token}` },
    withoutHeaders: 407,
  };
}

/**
 * callers-sa's request against an open gateway: the same token as `Proxy-Authorization`, no
 * `allow` rule, so the proxy drops the hop-by-hop header unread. What the ~0.9 KiB header
 * costs on its own (parsed by node:http, sent by wrk) — the floor callers-sa's check sits on.
 */
export async function prepareServiceAccountHeaderOnly(context) {
  const { headers } = await prepareCallersServiceAccount(context);
  return { configure: (config) => config, headers };
}

/**
 * callers-basic's request against an open gateway: the same `Basic` header, no `allow` rule, so
 * the proxy drops it unread. What carrying the header costs (wrk sends it, llhttp and node:http
 * parse it, the forwarding drops it) — the floor callers-basic's check sits on.
 */
export async function prepareBasicHeaderOnly(context) {
  const { headers } = await prepareCallersBasic(context);
  return { configure: (config) => config, headers };
}
