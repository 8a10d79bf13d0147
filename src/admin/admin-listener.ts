/**
 * The admin listener: a plain `node:http` server that answers the probes and /metrics itself
 * (admin-probes.ts) and builds the fastify instance (admin-server.ts: the status page, /status,
 * /quitquitquit, the 404 that lists the endpoints) on the first request for anything else.
 *
 * Why: a running sidecar's admin port sees Kubernetes probes and Prometheus scrapes almost
 * exclusively, and fastify with its router, plugin loader and reply machinery is ~35 ms and
 * ~550 KB of source of a start (bench/PROFILE.md, "the admin listener without fastify"). The
 * bundle keeps admin-server.ts and fastify in a chunk of their own, loaded by the `import()`
 * below; the answers are the same bytes either way, since both serve `probes.answer`.
 */
import type { AddressInfo } from "node:net";
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from "fastify";
import { PROXY_ERROR_STATUS, type ProxyErrorCode } from "../errors.js";
import {
  createServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "../net/node-http.js";
import type { AdminServerDeps } from "./admin-deps.js";
import {
  ADMIN_HEADERS,
  type AdminProbes,
  createAdminProbes,
  jsonAnswer,
  PROBE_PATHS,
  type ProbeAnswer,
  type ProbePath,
} from "./admin-probes.js";

/**
 * fastify's own default, kept for the same `Keep-Alive: timeout=72` as before and so that a
 * scraper polling every 15–60 s keeps reusing its connection.
 */
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

/** How long `close` lets admin requests in flight finish when the caller gives no bound. */
const DEFAULT_CLOSE_TIMEOUT_MS = 5_000;

/**
 * A whole admin request (headers and body) must arrive within this, or its connection is cut
 * (Node's default is 300 s). Admin requests are a probe, a scrape or a click: tiny, and answered
 * at once.
 */
const REQUEST_TIMEOUT_MS = 30_000;

/**
 * How often Node checks those deadlines: its default (30 s) would let them run 30 s late. Not
 * every second as the proxy listener does: the check is a timer that wakes an idle process, and
 * an admin socket cut up to 5 s late costs nothing.
 */
const TIMEOUT_CHECK_INTERVAL_MS = 5_000;

export type BuildAdminFastify = (
  deps: AdminServerDeps,
  probes: AdminProbes,
) => FastifyInstance | Promise<FastifyInstance>;

export interface AdminListenerOptions {
  /** How the fastify instance is built; default: admin-server.ts, loaded on first use. */
  buildFastify?: BuildAdminFastify;
}

export interface AdminListener {
  /** The node:http server (listening once `listen` resolved). */
  readonly server: Server;
  /** Binds the admin address; resolves with the bound address (port 0 picks one). */
  listen(address: { host: string; port: number }): Promise<AddressInfo>;
  /**
   * Stops accepting, closes idle keep-alive connections, lets requests in flight finish (their
   * answers carry `Connection: close`) for up to `timeoutMs`, then ends what remains; closes the
   * fastify instance if it was built.
   */
  close(timeoutMs?: number): Promise<void>;
  /** The fastify instance with every admin route, built (once) on first call and ready. */
  fastify(): Promise<FastifyInstance>;
  /** fastify's `inject` on that instance: tests reach every route without a port. */
  inject(options: InjectOptions | string): Promise<LightMyRequestResponse>;
  /** Whether the fastify instance has been built (the bundle's lazy chunk loaded). */
  fastifyBuilt(): boolean;
}

const loadAdminServer: BuildAdminFastify = async (deps, probes) =>
  (await import("./admin-server.js")).createAdminServer(deps, probes);

const PROBES: ReadonlySet<string> = new Set(PROBE_PATHS);

export function createAdminListener(
  deps: AdminServerDeps,
  options: AdminListenerOptions = {},
): AdminListener {
  const probes = createAdminProbes(deps);
  const buildFastify = options.buildFastify ?? loadAdminServer;
  const log = deps.logger.child({ component: "admin" }, { level: "warn" });
  let building: Promise<FastifyInstance> | undefined;
  let built: FastifyInstance | undefined;
  let closing = false;

  // Concurrent first requests share one build; a failed build is tried again by the next one.
  function fastify(): Promise<FastifyInstance> {
    building ??= (async () => {
      const app = await buildFastify(deps, probes);
      try {
        await app.ready();
      } catch (error) {
        await app.close().catch(() => {});
        throw error;
      }
      built = app;
      return app;
    })().catch((error: unknown) => {
      building = undefined;
      throw error;
    });
    return building;
  }

  function handle(req: IncomingMessage, res: ServerResponse): void {
    const probe = probeOf(req);
    if (probe !== undefined) {
      probes
        .answer(probe)
        .then((answer) => writeAnswer(res, answer, closing, req.method === "HEAD"))
        .catch((error: unknown) => failed(res, error, "admin endpoint failed"));
      return;
    }
    if (built) {
      built.routing(req, res);
      return;
    }
    if (closing) {
      writeError(res, "shutting_down", "the admin listener is closing", true);
      return;
    }
    fastify()
      .then(
        (app) => {
          if (!res.destroyed) app.routing(req, res);
        },
        (error: unknown) => failed(res, error, "admin server could not be built"),
      )
      .catch((error: unknown) => failed(res, error, "admin endpoint failed"));
  }

  // Logged, answered with the error contract; never thrown (an admin request must not crash the proxy).
  function failed(res: ServerResponse, error: unknown, what: string): void {
    log.error({ err: error, url: res.req.url }, what);
    writeError(res, "internal_error", "admin endpoint failed", closing);
  }

  // A client that opens a connection and never finishes its request must not hold an admin
  // socket for Node's default minutes: the same header deadline as the proxy listener
  // (`limits.headersTimeout`, as at start), and a bound on the whole request.
  const { headersTimeoutMs } = deps.config.limits;
  const server = createServer(
    {
      headersTimeout: headersTimeoutMs,
      // Node refuses a request deadline shorter than the header deadline.
      requestTimeout: Math.max(REQUEST_TIMEOUT_MS, headersTimeoutMs),
      connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS,
      keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    },
    handle,
  );

  return {
    server,
    async listen({ host, port }) {
      server.listen(port, host);
      await new Promise<void>((resolve, reject) => {
        const onError = (error: Error) => {
          server.off("listening", onListening);
          reject(error);
        };
        const onListening = () => {
          server.off("error", onError);
          resolve();
        };
        server.once("error", onError).once("listening", onListening);
      });
      return server.address() as AddressInfo;
    },
    async close(timeoutMs = DEFAULT_CLOSE_TIMEOUT_MS) {
      closing = true;
      const closed = server.listening
        ? new Promise<void>((resolve) => server.close(() => resolve()))
        : Promise.resolve();
      server.closeIdleConnections();
      const timer = setTimeout(() => server.closeAllConnections(), timeoutMs);
      try {
        // fastify's own close answers what still reaches it with 503 and `Connection: close`.
        const app = await building?.catch(() => undefined);
        await Promise.all([closed, app?.close()]);
      } finally {
        clearTimeout(timer);
      }
    },
    fastify,
    async inject(injectOptions) {
      return (await fastify()).inject(injectOptions);
    },
    fastifyBuilt: () => built !== undefined,
  };
}

/** The probe a request asks for: GET or HEAD of its exact path (any query); else undefined. */
function probeOf(req: IncomingMessage): ProbePath | undefined {
  if (req.method !== "GET" && req.method !== "HEAD") return undefined;
  const url = req.url ?? "";
  const query = url.indexOf("?");
  const path = query === -1 ? url : url.slice(0, query);
  return PROBES.has(path) ? (path as ProbePath) : undefined;
}

/**
 * `answer` with the headers fastify's route sends for it (`headOnly`, a HEAD: the headers
 * alone); nothing once the response started or its client is gone.
 */
function writeAnswer(
  res: ServerResponse,
  answer: ProbeAnswer,
  closing: boolean,
  headOnly = false,
): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(answer.statusCode, {
    "content-type": answer.contentType,
    ...ADMIN_HEADERS,
    "content-length": String(Buffer.byteLength(answer.body)),
    ...(closing ? { connection: "close" } : {}),
  });
  res.end(headOnly ? undefined : answer.body);
}

/** The JSON error contract, as fastify's error handler in admin-server.ts answers it. */
function writeError(
  res: ServerResponse,
  code: ProxyErrorCode,
  message: string,
  closing: boolean,
): void {
  writeAnswer(res, jsonAnswer(PROXY_ERROR_STATUS[code], { error: { code, message } }), closing);
}
