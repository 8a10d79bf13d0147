/**
 * The API server's `/openid/v1/jwks` as a test controls it: a real TLS server on 127.0.0.1
 * (a CA of its own, `caPem`) that publishes the keys a test gives it, can insist on a bearer
 * token as the API server does, can fail on demand, and keeps every request it was sent. It
 * can stop listening and listen again on the same port (an outage: connection refused).
 */
import { writeFile } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { JWK } from "jose";
import { afterAll, afterEach, beforeAll, vi } from "vitest";
import type { KubernetesCallersConfig } from "../../../src/callers/caller-types.js";
import { generateCertificates } from "../../helpers/tls.js";
import { AUDIENCE, ISSUER, tempDir } from "../helpers.js";

export const JWKS_PATH = "/openid/v1/jwks";

/** What the API server answers a client it cannot authenticate (401) or authorize (403). */
function kubernetesStatus(code: 401 | 403): string {
  return JSON.stringify({
    kind: "Status",
    status: "Failure",
    reason: code === 401 ? "Unauthorized" : "Forbidden",
    code,
  });
}

/** One request as the server received it. */
export interface JwksRequest {
  url: string;
  /** Its `Authorization` field, if any. */
  authorization: string | undefined;
}

/** An answer other than the published keys. */
export interface JwksFailure {
  status: number;
  body?: string;
  contentType?: string;
}

export interface JwksServer {
  /** `https://127.0.0.1:<port>/openid/v1/jwks`. */
  uri: string;
  /** The CA its certificate chains to (trust it through `caFile`). */
  caPem: string;
  /** Every request received, in order. */
  requests: JwksRequest[];
  /** The `Authorization` of every request, in order. */
  authorizations(): (string | undefined)[];
  /** Publish these keys (anything with a `jwk`); the default is none. */
  publish(...keys: readonly { jwk: JWK }[]): void;
  /** Answer 401 to any request without `Authorization: Bearer <token>`; undefined: no check. */
  requiredToken: string | undefined;
  /** A token it knows, whose identity may not read the keys: 403. */
  forbiddenToken: string | undefined;
  /** Answer this to every authorized request instead of the keys; undefined: the keys. */
  failure: JwksFailure | undefined;
  /** Forget the requests and return to the defaults (no keys, no token, no failure). */
  reset(): void;
  /** Close the port and every kept-alive socket: connection refused until `listen()`. */
  stopListening(): Promise<void>;
  /** Listen again on the same port. */
  listen(): Promise<void>;
  close(): Promise<void>;
}

export async function startJwksServer(): Promise<JwksServer> {
  const pki = await generateCertificates();
  let published: JWK[] = [];

  const answer = (req: IncomingMessage): { status: number; body: string; type?: string } => {
    if (req.url !== JWKS_PATH) return { status: 404, body: "" };
    const { authorization } = req.headers;
    if (jwks.forbiddenToken !== undefined && authorization === `Bearer ${jwks.forbiddenToken}`) {
      return { status: 403, body: kubernetesStatus(403), type: "application/json" };
    }
    if (jwks.requiredToken !== undefined && authorization !== `Bearer ${jwks.requiredToken}`) {
      return { status: 401, body: kubernetesStatus(401), type: "application/json" };
    }
    if (jwks.failure) {
      const { status, body = "", contentType } = jwks.failure;
      return { status, body, type: contentType };
    }
    return { status: 200, body: JSON.stringify({ keys: published }), type: "application/json" };
  };

  const server = createServer({ cert: pki.certPem, key: pki.keyPem }, (req, res) => {
    jwks.requests.push({ url: req.url ?? "", authorization: req.headers.authorization });
    const { status, body, type } = answer(req);
    res.writeHead(status, type ? { "content-type": type } : {}).end(body);
  });
  let port = 0;
  const listen = () => new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  await listen();
  port = (server.address() as AddressInfo).port;

  const jwks: JwksServer = {
    uri: `https://127.0.0.1:${port}${JWKS_PATH}`,
    caPem: pki.caPem,
    requests: [],
    authorizations: () => jwks.requests.map((r) => r.authorization),
    publish(...keys) {
      published = keys.map((k) => k.jwk);
    },
    requiredToken: undefined,
    forbiddenToken: undefined,
    failure: undefined,
    reset() {
      jwks.requests.length = 0;
      published = [];
      jwks.requiredToken = undefined;
      jwks.forbiddenToken = undefined;
      jwks.failure = undefined;
    },
    async stopListening() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
    async listen() {
      if (!server.listening) await listen();
    },
    close: () => (server.listening ? jwks.stopListening() : Promise.resolve()),
  };
  return jwks;
}

/** A {@link JwksServer} for one test file, with its CA in a temp folder and signing keys. */
export interface JwksBench {
  jwks: JwksServer;
  /** A temp folder for the file's own files (token files); removed after the file. */
  dir: string;
  /** The server's CA, as `callers.kubernetes.caFile`. */
  caFile: string;
  /** `callers.kubernetes` for the server (issuer, audience, jwksUri, caFile); `extra` adds. */
  config(extra?: Partial<KubernetesCallersConfig>): KubernetesCallersConfig;
}

/**
 * Start the server before the file's tests, close it after them;
 * after each test, real timers again and the server as it started: no keys, no token, no
 * failure, no requests, listening.
 */
export function useJwksBench(): JwksBench {
  let remove: () => Promise<void> = async () => {};
  const bench: JwksBench = {
    jwks: undefined as unknown as JwksServer,
    dir: "",
    caFile: "",
    config: (extra = {}) => ({
      issuer: ISSUER,
      audiences: [AUDIENCE],
      jwksUri: bench.jwks.uri,
      caFile: bench.caFile,
      ...extra,
    }),
  };
  beforeAll(async () => {
    const temp = await tempDir();
    ({ dir: bench.dir, remove } = temp);
    bench.jwks = await startJwksServer();
    bench.caFile = join(bench.dir, "ca.pem");
    await writeFile(bench.caFile, bench.jwks.caPem);
  });
  afterEach(async () => {
    vi.useRealTimers();
    bench.jwks.reset();
    await bench.jwks.listen();
  });
  afterAll(async () => {
    await bench.jwks?.close();
    await remove();
  });
  return bench;
}
