/**
 * A dispatcher that re-reads its client certificate (`reloadClientCertificate`: the token
 * endpoint's with tls-client-auth, and since issue 24 the upstream's too, where a provider may
 * bind the token to that certificate, RFC 8705 §3) presents a renewed certificate on the next
 * connection — over HTTP/1.1 and over HTTP/2, which it must still offer in ALPN.
 */
import { renameSync, writeFileSync } from "node:fs";
import { createSecureServer, type Http2SecureServer } from "node:http2";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { TLSSocket } from "node:tls";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDispatcher } from "../../src/net/dispatcher.js";
import { removeTempDirs, tempDir } from "../config/load-helpers.js";
import {
  certificateThumbprint,
  issueClientCertificate,
  type TestCa,
} from "../helpers/mtls-authorization-server.js";
import { generateCertificates } from "../helpers/tls.js";

describe("reloadClientCertificate", () => {
  let ca: TestCa;
  let server: Http2SecureServer;
  let origin: string;
  /** Open TLS connections, to end them as an upstream that closes idle connections would. */
  const sockets = new Set<TLSSocket>();
  const held: (() => void)[] = [];

  beforeAll(async () => {
    const pki = await generateCertificates();
    ca = { caPem: pki.caPem, caKeyPem: pki.caKeyPem };
    // Answers with the protocol and the client certificate it was given.
    server = createSecureServer(
      {
        cert: pki.certPem,
        key: pki.keyPem,
        ca: pki.caPem,
        requestCert: true,
        rejectUnauthorized: true,
        allowHTTP1: true,
      },
      (req, res) => {
        const peer = (req.socket as TLSSocket).getPeerX509Certificate();
        const answer = () =>
          res.end(
            JSON.stringify({
              httpVersion: req.httpVersion,
              presented: peer && certificateThumbprint(peer),
            }),
          );
        // /pair: held until a second /pair arrives, so two must be in flight at once.
        if (req.url !== "/pair") return answer();
        held.push(answer);
        if (held.length === 2) for (const release of held.splice(0)) release();
      },
    );
    server.on("secureConnection", (socket: TLSSocket) => {
      sockets.add(socket);
      socket.once("close", () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    origin = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    removeTempDirs();
  });

  /** Certificate files in a temp folder, replaced atomically by `write`. */
  const clientFiles = () => {
    const dir = tempDir();
    const write = (name: string, pem: string) => {
      writeFileSync(join(dir, `${name}.new`), pem);
      renameSync(join(dir, `${name}.new`), join(dir, name));
      return join(dir, name);
    };
    return { write, caFile: write("ca.pem", ca.caPem) };
  };
  /** One connection (as an HTTP/2 upstream gets), re-reading certFile/keyFile. */
  const dispatcherFor = (
    files: { caFile: string; certFile: string; keyFile: string },
    allowH2: boolean,
  ) =>
    createDispatcher({
      tls: { ...files, serverName: undefined },
      connections: 1,
      connectTimeoutMs: 5_000,
      headersTimeoutMs: 5_000,
      bodyTimeoutMs: 5_000,
      idleConnectionMs: 1_000,
      egressProxy: undefined,
      allowH2,
      reloadClientCertificate: true,
    });
  const getWith = async (dispatcher: ReturnType<typeof createDispatcher>, path = "/") => {
    try {
      const res = await request(`${origin}${path}`, { dispatcher });
      return (await res.body.json()) as { httpVersion: string; presented: string };
    } catch (error) {
      return (error as Error).message; // the connection just ended under it
    }
  };

  it.each([
    ["HTTP/1.1", false, "1.1"],
    ["HTTP/2", true, "2.0"],
  ])("%s: the renewed certificate on the next connection", async (_, allowH2, httpVersion) => {
    const { write, caFile } = clientFiles();
    const before = await issueClientCertificate(ca, "app");
    const after = await issueClientCertificate(ca, "app");
    const keyFile = write("client.key", before.keyPem);
    const certFile = write("client.crt", before.certPem);
    const dispatcher = dispatcherFor({ caFile, certFile, keyFile }, allowH2);
    const get = () => getWith(dispatcher);
    try {
      expect(await get()).toEqual({
        httpVersion,
        presented: certificateThumbprint(before.certPem),
      });
      write("client.key", after.keyPem);
      write("client.crt", after.certPem);
      for (const socket of sockets) socket.destroy();
      await expect
        .poll(get, { timeout: 5_000 })
        .toEqual({ httpVersion, presented: certificateThumbprint(after.certPem) });
    } finally {
      await dispatcher.close();
    }
  });

  it("HTTP/2: streams still share the one connection (not one request at a time)", async () => {
    const { write, caFile } = clientFiles();
    const client = await issueClientCertificate(ca, "app");
    const files = {
      caFile,
      keyFile: write("client.key", client.keyPem),
      certFile: write("client.crt", client.certPem),
    };
    const dispatcher = dispatcherFor(files, true);
    try {
      // Each /pair is answered only once the other arrived: one stream at a time would hang.
      const pair = await Promise.all([getWith(dispatcher, "/pair"), getWith(dispatcher, "/pair")]);
      const expected = { httpVersion: "2.0", presented: certificateThumbprint(client.certPem) };
      expect(pair).toEqual([expected, expected]);
    } finally {
      await dispatcher.close();
    }
  });
});
