/**
 * Issue 24, certificate-bound tokens (RFC 8705 §3): a real authorization server
 * (node-oidc-provider, tls_client_auth) binds each token to the client certificate of the
 * token request (`cnf.x5t#S256`); the resource server accepts a token only over a connection
 * that presents that certificate. The proxy needs nothing new for it: `tokenTls` and `tls`
 * presenting the same certificate is the whole pairing — and a different one upstream is
 * refused, which is what `validate` warns about (test/config/binding-warning.test.ts).
 */
import { renameSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { TLSSocket } from "node:tls";
import { createLocalJWKSet, type JWTPayload, jwtVerify } from "jose";
import { request } from "undici";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import {
  certificateThumbprint,
  issueClientCertificate,
  type MtlsAuthorizationServer,
  startMtlsAuthorizationServer,
} from "../helpers/mtls-authorization-server.js";

/** What the resource server saw in one request. */
interface SeenRequest {
  status: number;
  /** `x5t#S256` of the certificate the connection presented. */
  presented: string | undefined;
  /** `cnf.x5t#S256` of the verified token. */
  boundTo: string | undefined;
  reason: string | undefined;
}

/**
 * An HTTPS resource server that asks for a client certificate and accepts a Bearer token only
 * when it verifies against the AS's keys and its `cnf.x5t#S256` is the SHA-256 thumbprint of
 * the certificate this connection presented (RFC 8705 §3.1); 401 `invalid_token` otherwise.
 */
async function startBoundResourceServer(as: MtlsAuthorizationServer) {
  const keys = createLocalJWKSet(as.jwks);
  const seen: SeenRequest[] = [];
  const check = async (authorization: string | undefined, socket: TLSSocket) => {
    const record: SeenRequest = {
      status: 401,
      presented: undefined,
      boundTo: undefined,
      reason: undefined,
    };
    seen.push(record);
    const peer = socket.getPeerX509Certificate();
    record.presented = peer && certificateThumbprint(peer);
    const token = /^Bearer (\S+)$/.exec(authorization ?? "")?.[1];
    if (token === undefined) return Object.assign(record, { reason: "no Bearer token" });
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, keys, {
        issuer: as.issuer,
        audience: as.resource,
        typ: "at+jwt",
      }));
    } catch (error) {
      return Object.assign(record, { reason: `token invalid: ${(error as Error).message}` });
    }
    record.boundTo = (payload.cnf as Record<string, string> | undefined)?.["x5t#S256"];
    if (record.boundTo === undefined) return Object.assign(record, { reason: "token not bound" });
    if (record.boundTo !== record.presented) {
      return Object.assign(record, { reason: "cnf.x5t#S256 is not the presented certificate" });
    }
    return Object.assign(record, { status: 200 });
  };
  const server: Server = createServer(
    {
      cert: as.serverCertificate.certPem,
      key: as.serverCertificate.keyPem,
      ca: as.ca.caPem,
      requestCert: true,
      rejectUnauthorized: false,
    },
    (req, res) => {
      req.resume();
      void check(req.headers.authorization, req.socket as TLSSocket).then((record) => {
        const headers: Record<string, string> = { "content-type": "application/json" };
        if (record.status === 401) {
          headers["www-authenticate"] = `Bearer error="invalid_token"`;
        }
        res.writeHead(record.status, headers).end(JSON.stringify({ reason: record.reason }));
      });
    },
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    origin: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe("certificate-bound tokens (RFC 8705) through the proxy", () => {
  let as: MtlsAuthorizationServer;
  let rs: Awaited<ReturnType<typeof startBoundResourceServer>>;
  let bound: { certPem: string; keyPem: string };
  let other: { certPem: string; keyPem: string };
  let gateway: AppUnderTest | undefined;

  beforeAll(async () => {
    as = await startMtlsAuthorizationServer({ clientId: "ledger-app" });
    rs = await startBoundResourceServer(as);
    bound = await issueClientCertificate(as.ca, "ledger-app");
    other = await issueClientCertificate(as.ca, "someone-else");
  });
  afterEach(async () => {
    await gateway?.close();
    gateway = undefined;
  });
  afterAll(async () => {
    await rs?.close();
    await as?.close();
  });

  /** The proxy with `tokenTls` presenting the bound certificate and `tls` as given. */
  const startGateway = async (upstreamCertificate: "bound" | "other" | "none") => {
    gateway = await startAppUnderTest({
      caPem: as.ca.caPem,
      files: {
        "bound.crt": bound.certPem,
        "bound.key": bound.keyPem,
        "other.crt": other.certPem,
        "other.key": other.keyPem,
      },
      config: {
        upstreams: [
          {
            name: "ledger",
            baseUrl: rs.origin,
            tokenUrl: as.tokenUrl,
            clientId: as.clientId,
            clientAuth: "tls-client-auth",
            scope: as.scope,
            tokenParams: { resource: as.resource },
            tokenTls: { caFile: "test-ca.pem", certFile: "bound.crt", keyFile: "bound.key" },
            tls:
              upstreamCertificate === "none"
                ? {}
                : { certFile: `${upstreamCertificate}.crt`, keyFile: `${upstreamCertificate}.key` },
          },
        ],
      },
    });
    return gateway;
  };

  const get = async (url: string) => {
    const res = await request(url);
    return { status: res.statusCode, body: await res.body.text() };
  };

  it("the same certificate on tokenTls and tls: the bound token is accepted", async () => {
    const { url } = await startGateway("bound");
    const seenBefore = rs.seen.length;
    expect((await get(`${url}/accounts/1`)).status).toBe(200);

    const x5t = certificateThumbprint(bound.certPem);
    // The AS authenticated the client by that certificate and bound the token to it…
    const token = as.requests.filter((r) => r.path === "/token").at(-1)!;
    expect(token).toEqual({ path: "/token", status: 200, x5tS256: x5t });
    // …and the resource server saw the same certificate under it.
    expect(rs.seen.slice(seenBefore)).toEqual([
      { status: 200, presented: x5t, boundTo: x5t, reason: undefined },
    ]);
  });

  it("a renewed certificate: the next token is bound to it and tls presents it too", async () => {
    const gw = await startGateway("bound");
    expect((await get(`${gw.url}/accounts/1`)).status).toBe(200);

    // cert-manager renews the Secret: both files change under the running proxy.
    const renewed = await issueClientCertificate(as.ca, "ledger-app");
    const x5t = certificateThumbprint(renewed.certPem);
    gw.writeFile("bound.key.new", renewed.keyPem);
    gw.writeFile("bound.crt.new", renewed.certPem);
    renameSync(join(gw.dir, "bound.key.new"), join(gw.dir, "bound.key"));
    renameSync(join(gw.dir, "bound.crt.new"), join(gw.dir, "bound.crt"));

    // The rotated credential drops the cached token; the next one is bound to the new certificate.
    await expect
      .poll(() => as.requests.filter((r) => r.path === "/token" && r.status === 200).at(-1), {
        timeout: 15_000,
      })
      .toMatchObject({ x5tS256: x5t });
    const seenBefore = rs.seen.length;
    expect((await get(`${gw.url}/accounts/2`)).status).toBe(200);
    expect(rs.seen.slice(seenBefore).at(-1)).toEqual({
      status: 200,
      presented: x5t,
      boundTo: x5t,
      reason: undefined,
    });
  });

  it.each([
    ["another certificate", "other"],
    ["no certificate", "none"],
  ] as const)("%s upstream: the resource server refuses the token (401)", async (_, which) => {
    const { url } = await startGateway(which);
    const seenBefore = rs.seen.length;
    expect((await get(`${url}/accounts/1`)).status).toBe(401);

    const seen = rs.seen.slice(seenBefore);
    expect(seen.length).toBeGreaterThan(0); // the 401 replay may try once more
    for (const s of seen) {
      expect(s).toMatchObject({
        status: 401,
        boundTo: certificateThumbprint(bound.certPem),
        reason: "cnf.x5t#S256 is not the presented certificate",
      });
      expect(s.presented).toBe(
        which === "other" ? certificateThumbprint(other.certPem) : undefined,
      );
    }
  });
});
