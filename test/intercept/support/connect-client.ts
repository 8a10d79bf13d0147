/**
 * What the CONNECT interception tests share (issue 34): a raw CONNECT on a real socket (the
 * answer head as sent, the socket handed back for TLS on a 200), TLS to the proxy's leaf over
 * it, one HTTP/1.1 request on that TLS connection, a child environment for the real tools
 * (curl, wget, Python, git) without the runner's proxy settings, and the config entry of an
 * intercepted upstream.
 */
import { spawn } from "node:child_process";
import type { IncomingHttpHeaders } from "node:http";
import { request as httpsRequest } from "node:https";
import { isIP, connect as netConnect, type Socket } from "node:net";
import { type TLSSocket, connect as tlsConnect } from "node:tls";
import type { CaFiles } from "../../helpers/intercept-ca-files.js";
import { parseResponses, type RawResponse } from "../../helpers/raw-http.js";

export interface ConnectAnswer {
  status: number;
  /** The answer's head exactly as sent (status line and fields, without the blank line). */
  head: string;
  /** The whole answer, parsed: headers by lowercase name, and the body of a refusal. */
  response: RawResponse | undefined;
  /** The connection: open after a 200 (for TLS), closed by the proxy after a refusal. */
  socket: Socket;
  /** Bytes the proxy sent after the answer's head before TLS started (must be none). */
  extra: Buffer;
}

/**
 * Send `CONNECT authority` (with `headers`) on a fresh connection to `proxyUrl` and read the
 * answer: for a 200 only its head (the socket is then the tunnel), for a refusal everything
 * until the proxy closes.
 */
export function sendConnect(
  proxyUrl: string,
  authority: string,
  headers: Record<string, string> = {},
  options: { timeoutMs?: number } = {},
): Promise<ConnectAnswer> {
  const proxy = new URL(proxyUrl);
  return new Promise((resolve, reject) => {
    const socket = netConnect(Number(proxy.port), proxy.hostname);
    let received = Buffer.alloc(0);
    let head: string | undefined;
    const timer = setTimeout(() => {
      socket.destroy();
      reject(
        new Error(`no answer to CONNECT ${authority} in time: ${received.toString("latin1")}`),
      );
    }, options.timeoutMs ?? 10_000);
    const settle = (answer: ConnectAnswer) => {
      clearTimeout(timer);
      socket.off("data", onData);
      resolve(answer);
    };
    const onData = (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (head !== undefined) return;
      const end = received.indexOf("\r\n\r\n");
      if (end === -1) return;
      head = received.subarray(0, end).toString("latin1");
      const status = Number(head.split(" ")[1]);
      if (status === 200) {
        socket.pause();
        settle({
          status,
          head,
          response: undefined,
          socket,
          extra: received.subarray(end + 4),
        });
      }
    };
    socket.on("data", onData);
    socket.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.on("close", () => {
      if (head === undefined || Number(head.split(" ")[1]) === 200) return;
      const text = received.toString("latin1");
      settle({
        status: Number(head.split(" ")[1]),
        head,
        response: parseResponses(text)[0],
        socket,
        extra: Buffer.alloc(0),
      });
    });
    socket.on("connect", () => {
      let fields = "";
      for (const [name, value] of Object.entries(headers)) fields += `${name}: ${value}\r\n`;
      socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n${fields}\r\n`);
    });
  });
}

export interface TlsThroughOptions {
  /** The host the client means: SNI (unless an IP literal) and what the leaf must name. */
  host: string;
  /** SNI other than `host` (a client that says something else). */
  servername?: string;
  /** CAs to trust; default Node's built-in roots. */
  ca?: string;
  ALPNProtocols?: string[];
}

/** TLS over an established tunnel; resolves once the handshake is done (rejects on its failure). */
export function tlsThrough(socket: Socket, options: TlsThroughOptions): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const tls = tlsConnect({
      socket,
      host: options.host,
      // RFC 6066 §3: no SNI for an IP literal.
      ...(isIP(options.host) === 0 || options.servername !== undefined
        ? { servername: options.servername ?? options.host }
        : {}),
      ca: options.ca,
      ALPNProtocols: options.ALPNProtocols ?? ["http/1.1"],
    });
    tls.once("secureConnect", () => {
      tls.off("error", reject);
      resolve(tls);
    });
    tls.once("error", reject);
  });
}

export interface TunnelAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

/** One HTTP/1.1 request on an established TLS connection (kept open for the next). */
export function requestOver(
  tls: TLSSocket,
  authority: string,
  path: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<TunnelAnswer> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        path,
        method: options.method ?? "GET",
        setHost: false,
        // Node's client says "close" on a connection without an agent; this one is reused.
        headers: { host: authority, connection: "keep-alive", ...options.headers },
        // Without an agent: the request goes on this connection (Node's createConnection).
        createConnection: () => tls,
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          text += chunk;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

/** `intercept:` of a config document for the CA files. */
export function interceptBlock(ca: CaFiles): Record<string, string> {
  return { caCertFile: ca.caCertFile, caKeyFile: ca.caKeyFile };
}

/**
 * An intercepted upstream entry: `baseUrl`'s authority is what CONNECT names; the token comes
 * from the emulator's endpoint (`tokenUrl`) unless `extra` says otherwise.
 */
export function interceptedUpstream(
  name: string,
  baseUrl: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    name,
    baseUrl,
    clientId: "demo-client",
    clientSecret: "demo-secret",
    intercept: true,
    match: { hosts: [`${name}.internal`] },
    ...extra,
  };
}

/** A child environment without the runner's proxy settings, HOME in `home`, then `extra`. */
export function toolEnv(home: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value === undefined) continue;
    // The runner's own proxy and trust settings would change what the tools do.
    if (/^(https?|all|no)_proxy$/i.test(key)) continue;
    if (
      /^(SSL_CERT_FILE|SSL_CERT_DIR|REQUESTS_CA_BUNDLE|CURL_CA_BUNDLE|NODE_EXTRA_CA_CERTS)$/.test(
        key,
      )
    )
      continue;
    if (key.startsWith("GIT_")) continue;
    env[key] = value;
  }
  return {
    ...env,
    HOME: home,
    GIT_TERMINAL_PROMPT: "0",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    ...extra,
  };
}

export interface ToolRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Run a tool with stdin closed (openssl s_client ends after the handshake), never throwing: its
 * exit code (-1 for a signal, a timeout or a spawn failure) and output.
 */
export function runTool(
  file: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  timeoutMs = 30_000,
): Promise<ToolRun> {
  return new Promise((resolve) => {
    const child = spawn(file, args, { env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("error", (error) => {
      clearTimeout(timer);
      resolve({ code: -1, stdout, stderr: stderr + String(error) });
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, stdout, stderr });
    });
  });
}

/** True when `tool` is on PATH. */
export async function hasTool(tool: string): Promise<boolean> {
  return (await runTool("which", [tool], process.env)).code === 0;
}

/** The password of the Java trust stores the tests build with keytool. */
export const TRUST_STORE_PASSWORD = "changeit";

/** keytool's arguments that import `caCertFile` into the PKCS12 trust store `store`. */
export function keytoolImportArgs(caCertFile: string, store: string): string[] {
  return [
    "-importcert",
    "-noprompt",
    "-alias",
    "bearer-proxy-intercept",
    "-file",
    caCertFile,
    "-keystore",
    store,
    "-storetype",
    "PKCS12",
    "-storepass",
    TRUST_STORE_PASSWORD,
  ];
}
