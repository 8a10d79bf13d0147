import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer, type Server } from "node:https";
import type { Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SCRIPTING_PREVIEW_HEADER } from "../config/api-versions.js";
import { createAccessTokenAuthority } from "./access-tokens.js";
import { handleApiRequest, matchApiRoute } from "./api-routes.js";
import { generateCertificates } from "./certificates.js";
import {
  CONTROL_PREFIX,
  checkLifetime,
  copyStats,
  createStats,
  type EmulatorState,
  handleControl,
  indexClients,
} from "./control.js";
import type { Emulator, EmulatorClient, EmulatorOptions } from "./emulator-types.js";
import { pathOf, sendJson } from "./http-io.js";
import { handleTokenRequest, TOKEN_PATHS } from "./token-endpoint.js";

export type * from "./emulator-types.js";

/** The client every emulator accepts unless told otherwise; fine to print (demo only). */
export const DEMO_CLIENT: Readonly<EmulatorClient> = Object.freeze({
  clientId: "demo-client",
  clientSecret: "demo-secret",
});

const DEFAULT_SCOPE = "files:read files:write";

/** Whether each running emulator still accepts the demo client, for describeEmulator. */
const demoClientActive = new WeakMap<Emulator, () => boolean>();

/** Start an HTTPS emulator of the upstream described in shared/SPEC.md. */
export async function startEmulator(options: EmulatorOptions = {}): Promise<Emulator> {
  const host = options.host ?? "127.0.0.1";
  const now = options.now ?? Date.now;
  const scopes = (options.scope ?? DEFAULT_SCOPE).split(" ").filter((s) => s !== "");
  const state: EmulatorState = {
    now,
    tokens: createAccessTokenAuthority(now),
    scopes,
    clients: indexClients(options.clients ?? [DEMO_CLIENT]),
    tokenLifetimeSeconds: checkLifetime(options.tokenLifetimeSeconds ?? 600),
    tokenFault: undefined,
    refusedAudiences: new Set(),
    stats: createStats(),
  };

  const tls = options.tls
    ? { ...options.tls, caPem: options.tls.caPem ?? options.tls.certPem }
    : await generateCertificates();
  const caPem = tls.caPem;
  const tempDir = options.caFile
    ? undefined
    : mkdtempSync(join(tmpdir(), "bearer-proxy-emulator-"));
  const caFile = options.caFile ?? join(tempDir!, "ca.pem");
  writeFileSync(caFile, caPem);

  const server = createServer({ cert: tls.certPem, key: tls.keyPem }, (req, res) =>
    dispatch(state, req, res),
  );
  // Node drops header fields beyond 2,000 by default; echo must show every one it was sent.
  server.maxHeadersCount = 0;
  const sockets = trackSockets(server);
  try {
    await listen(server, host, options.port ?? 8443);
  } catch (error) {
    if (tempDir) rmSync(tempDir, { recursive: true, force: true });
    throw error;
  }
  const port = (server.address() as { port: number }).port;

  let closing: Promise<void> | undefined;
  const emulator: Emulator = {
    url: `https://${host.includes(":") ? `[${host}]` : host}:${port}`,
    port,
    caPem,
    caFile,
    stats: () => copyStats(state.stats),
    resetStats: () => {
      state.stats = createStats();
    },
    revokeAllTokens: () => state.tokens.revokeAll(),
    setTokenLifetime: (seconds) => {
      state.tokenLifetimeSeconds = checkLifetime(seconds);
    },
    setClients: (clients) => {
      state.clients = indexClients(clients);
    },
    setTokenFault: (handler) => {
      state.tokenFault = handler;
    },
    refuseAudiences: (audiences) => {
      state.refusedAudiences = new Set(audiences);
    },
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => {
          if (tempDir) rmSync(tempDir, { recursive: true, force: true });
          resolve();
        });
        // Keep-alive and half-open TLS sockets would hold close() open; end them now.
        for (const socket of sockets) socket.destroy();
      });
      return closing;
    },
  };
  demoClientActive.set(
    emulator,
    () => state.clients.get(DEMO_CLIENT.clientId) === DEMO_CLIENT.clientSecret,
  );
  return emulator;
}

function dispatch(state: EmulatorState, req: IncomingMessage, res: ServerResponse): void {
  const path = pathOf(req.url);
  let pending: Promise<void> | undefined;
  try {
    const tokenVersion = TOKEN_PATHS[path];
    const apiRoute = tokenVersion === undefined ? matchApiRoute(path) : undefined;
    if (tokenVersion !== undefined) pending = handleTokenRequest(state, req, res, tokenVersion);
    else if (path.startsWith(CONTROL_PREFIX)) handleControl(state, req, res);
    else if (apiRoute) handleApiRequest(state, req, res, apiRoute);
    else sendJson(res, 404, { error: "not_found", error_description: "no such route" });
  } catch {
    failInternally(res);
  }
  pending?.catch(() => failInternally(res));
}

// A bug in a route (or in a test's fault handler) must cost one request, never the process.
function failInternally(res: ServerResponse): void {
  if (res.headersSent) res.destroy();
  else sendJson(res, 500, { error: "server_error", error_description: "emulator internal error" });
}

function trackSockets(server: Server): Set<Socket> {
  const sockets = new Set<Socket>();
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  // Malformed requests (bad syntax, oversized headers): answer like Node would, never throw.
  server.on("clientError", (error: NodeJS.ErrnoException, socket) => {
    if (socket.writable && !socket.destroyed) {
      const status =
        error.code === "HPE_HEADER_OVERFLOW"
          ? "431 Request Header Fields Too Large"
          : "400 Bad Request";
      socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    }
    socket.destroy();
  });
  return sockets;
}

function listen(server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
}

/** Human-readable lines: where the emulator is, which CA to trust, and curl commands to try it. */
export function describeEmulator(emulator: Emulator): string {
  const ca = shellQuote(emulator.caFile);
  const url = emulator.url;
  const demo = demoClientActive.get(emulator)?.() ?? false;
  const id = demo ? DEMO_CLIENT.clientId : "<client_id>";
  const secret = demo ? DEMO_CLIENT.clientSecret : "<client_secret>";
  const preview = SCRIPTING_PREVIEW_HEADER;
  return [
    `upstream emulator listening on ${url}`,
    `  CA certificate: ${emulator.caFile}`,
    demo ? `  demo client: client_id=${id} client_secret=${secret}` : "  clients: as configured",
    "",
    "  # default API version (2022-01-01)",
    `  TOKEN=$(curl -s --cacert ${ca} -X POST ${url}/iam/v1/oauth2/token \\`,
    `    -H 'Content-Type: application/x-www-form-urlencoded;charset=UTF-8' \\`,
    `    --data 'grant_type=client_credentials&client_id=${id}&client_secret=${secret}' | sed -E 's/.*"access_token":"([^"]+)".*/\\1/')`,
    `  curl --cacert ${ca} -H "Authorization: Bearer $TOKEN" ${url}/platform/v1/spreadsheets/demo`,
    "",
    "  # scripting preview",
    `  TOKEN=$(curl -s --cacert ${ca} -X POST ${url}/oauth2/token -H 'X-Version: ${preview}' \\`,
    `    -H 'Content-Type: application/json' \\`,
    `    --data '{"grant_type":"client_credentials","client_id":"${id}","client_secret":"${secret}"}' | sed -E 's/.*"access_token":"([^"]+)".*/\\1/')`,
    `  curl --cacert ${ca} -H "Authorization: Bearer $TOKEN" -H 'X-Version: ${preview}' ${url}/scripts`,
  ].join("\n");
}

function shellQuote(text: string): string {
  return /^[\w./:-]+$/.test(text) ? text : `'${text.replaceAll("'", "'\\''")}'`;
}
