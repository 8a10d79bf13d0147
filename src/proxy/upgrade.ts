/**
 * The proxy listener's `upgrade` handler (WebSocket and other `Upgrade` requests, RFC 9110 §7.8):
 * the same guards, routing and header injection as a forwarded request (request-guards.ts,
 * router.ts, inject-headers.ts), the exchange of forward.ts dispatched as an Upgrade request
 * (upgrade-dispatcher.ts) — so a 401 gets the usual new token and one replay, and any answer but
 * 101 is relayed as a normal response — then, after a 101, the connection relayed byte for byte
 * (upgrade-relay.ts). One access line and one request in the metrics per upgrade, written when
 * the upgraded connection closes: status 101, its whole duration, bytes each way.
 *
 * Node hands a request with `Connection: upgrade` + `Upgrade` to this event instead of the
 * request handler whenever a listener exists. A protocol the upstream does not list in
 * `upgrades` is ignored, as RFC 9110 §7.8 allows, and the request is served as a plain one —
 * except WebSocket, refused with 501: a WebSocket client fails on any answer but 101 anyway, and
 * the code says why.
 *
 * Traced as a plain request is (observability/tracing.ts): a SERVER span continuing the
 * client's `traceparent`, a CLIENT span per attempt (the Exchange's), a token wait when there is
 * one. The SERVER span ends with the handshake's answer, not with the tunnel (see onUpgrade).
 *
 * Paced as a plain request is (pacing/gate.ts): the handshake is a request the upstream counts
 * against its limit, so after the token it takes a turn from the upstream's pacer (same budget,
 * same `rateLimit.wait`, the same 429s), and the exchange's replay and retries wait for theirs.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { Dispatcher } from "undici";
import type { CallerGate, GateVerdict } from "../callers/caller-gate.js";
import type { LimitsConfig, PathsConfig, UpstreamConfig } from "../config/types.js";
import { PROXY_ERROR_STATUS, type ProxyErrorCode } from "../errors.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import { NOOP_TRACING, type ServerSpan, type Tracing } from "../observability/tracing.js";
import type { AccessToken, TokenProvider } from "../token/types.js";
import type { AccessLog } from "./access-log.js";
import { type Exchange, startExchange } from "./forward.js";
import { createHeaderInjector, type HeaderInjector } from "./inject-headers.js";
import type { ProcessLoad } from "./overload.js";
import { budgetKey, passGate, type WaitingPlaces } from "./pacing/gate.js";
import type { UpstreamPacing } from "./pacing/upstream-pacing.js";
import type { WaitingRoom } from "./pacing/waiting-room.js";
import { mapUpstreamError, sendProxyError } from "./proxy-errors.js";
import { type AcceptedTarget, checkRequest } from "./request-guards.js";
import { createRequestRecorder } from "./request-log.js";
import { createRouter, upstreamPath } from "./router.js";
import {
  type HangUpWatch,
  responseOnSocket,
  watchForHangUp,
  whenConnectionIdle,
} from "./socket-response.js";
import { UpgradeDispatcher } from "./upgrade-dispatcher.js";
import {
  type RelayOutcome,
  relayUpgraded,
  switchingProtocolsHead,
  type UpgradeRelay,
} from "./upgrade-relay.js";

export interface UpgradeHandlerDeps {
  limits: LimitsConfig;
  /** How request paths are normalized (the guards do it, as for plain requests). */
  paths: PathsConfig;
  /** The upstreams served on this listener. */
  upstreams: readonly UpstreamConfig[];
  tokenFor(upstreamName: string): TokenProvider;
  /** The upstream's HTTP/1.1 dispatcher (an upgrade never goes over HTTP/2). */
  upgradeDispatcherFor(upstreamName: string): Dispatcher;
  metrics: Metrics;
  logger: Logger;
  accessLog: AccessLog;
  /** Serves a request whose Upgrade is ignored as a plain request (the listener's handler). */
  serveAsRequest(req: IncomingMessage, res: ServerResponse): void;
  /** Upgrades open over every listener, bounded by `limits.maxUpgrades`. */
  upgradeLoad: ProcessLoad;
  /** Where a handshake waits for its pacing turn, out of `upgradeLoad` (`limits.maxWaiting`). */
  waitingRoom: WaitingRoom;
  /** Who may use which upstream; undefined: everyone. */
  callerGate?: CallerGate | undefined;
  /** Request and upstream-attempt spans, as for plain requests; default: off. */
  tracing?: Tracing | undefined;
  /** The upstream's pacing gate and retry policy, as for plain requests; undefined: neither. */
  pacingFor?: ((upstreamName: string) => UpstreamPacing | undefined) | undefined;
}

export interface UpgradeHandler {
  (req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Upgrade requests waiting for their answer plus upgraded connections open. */
  inFlight(): number;
  /** Destroys every upgraded connection (the end of a shutdown's grace period). */
  destroyAll(): void;
}

/** Label used when a request was refused before it reached an upstream. */
const NO_UPSTREAM = "none";

/** Protocols of an `Upgrade` value: `name[/version]`, comma-separated (RFC 9110 §7.8). */
function requestedProtocols(value: string | undefined): string[] {
  if (value === undefined) return [];
  return value
    .split(",")
    .map((part) => part.trim())
    .filter((part) => part !== "");
}

function protocolName(protocol: string): string {
  const slash = protocol.indexOf("/");
  return (slash === -1 ? protocol : protocol.slice(0, slash)).toLowerCase();
}

/** An upgrade routed and allowed by its upstream's `upgrades`, on its way to the caller gate. */
interface RoutedUpgrade {
  upstream: UpstreamConfig;
  guard: AcceptedTarget;
  /** The requested protocols the upstream allows. */
  protocols: string[];
}

/** How a relay's end shows in the access line. */
const RELAY_ERROR: Record<NonNullable<RelayOutcome["reason"]>, string | undefined> = {
  client_error: "client_closed",
  upstream_error: "upstream_reset",
  idle: undefined,
  shutdown: undefined,
};

export function createUpgradeHandler(deps: UpgradeHandlerDeps): UpgradeHandler {
  const recordRequest = createRequestRecorder(deps.metrics, deps.accessLog);
  const tracing = deps.tracing ?? NOOP_TRACING;
  const router = createRouter(deps.upstreams);
  const injectors = new Map<string, HeaderInjector>();
  // Traced, each attempt writes its own trace fields in place of the client's (request-plan.ts).
  const injectorOptions = { dropTraceContext: tracing.enabled };
  for (const upstream of deps.upstreams) {
    injectors.set(upstream.name, createHeaderInjector(upstream, injectorOptions));
  }
  const isKnownHost = (authority: string) => router.isKnownHost(authority);
  const relays = new Set<UpgradeRelay>();
  let waiting = 0;
  const waitingPlaces: WaitingPlaces = { room: deps.waitingRoom, limits: deps.limits };

  const handler = ((req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const client = socket as Socket;
    // Node removed its own error listener when it handed the socket over.
    client.on("error", ignore);
    whenConnectionIdle(client, () => {
      try {
        handle(req, client, head);
      } catch (err) {
        // Never an exception into Node's parser callbacks: it would end the process.
        deps.logger.error({ err }, "upgrade handler failed");
        client.destroy();
      }
    });
  }) as UpgradeHandler;

  function handle(req: IncomingMessage, client: Socket, head: Buffer): void {
    if (client.destroyed) return;
    const startMs = performance.now();
    const method = req.method ?? "GET";
    const res = responseOnSocket(req, client);
    let upstreamName = NO_UPSTREAM;
    let pathname = "";
    let routed = false;
    let finished = false;
    let upgraded = false;
    /** Counted in `upgradeLoad` until the relay (or the refusal) ends. */
    let admitted = false;
    let abortWait: AbortController | undefined;
    /** Reads the connection until the 101, so a hang-up while waiting is seen. */
    let hangUp: HangUpWatch | undefined;
    let exchange: Exchange | undefined;
    let caller: string | undefined;
    let span: ServerSpan | undefined;
    /** ms the pacing gate held the handshake (its turn, a pause, a replay's turn). */
    let waitMs = 0;
    /** Handshakes sent upstream (retries and replays included). */
    let attempts = 0;
    waiting++;

    /**
     * The SERVER span, started once this is known to be an upgrade (an ignored protocol goes to
     * the request handler, which starts its own) or when it ends before that.
     */
    function serverSpan(): ServerSpan {
      span ??= tracing.startServerSpan(req);
      return span;
    }

    /** Ends the SERVER span with the answer the client got to its Upgrade request. */
    function endSpan(status: number, errorCode?: string): void {
      const server = serverSpan();
      if (upstreamName !== NO_UPSTREAM) server.setUpstream(upstreamName);
      if (pathname) server.setPath(pathname);
      server.end(status, errorCode);
    }

    const finish = (
      status: number,
      extra: {
        bytesIn?: number;
        bytesOut?: number;
        replayed?: boolean;
        errorCode?: string | undefined;
        cause?: unknown;
      } = {},
    ) => {
      if (finished) return;
      finished = true;
      if (!upgraded) {
        waiting--;
        endSpan(status, extra.errorCode);
      }
      if (admitted) {
        deps.upgradeLoad.leave();
        deps.metrics.upgradesOpen.dec();
      }
      recordRequest({
        upstream: upstreamName,
        routed,
        method,
        pathname,
        status,
        startMs,
        bytesIn: extra.bytesIn ?? 0,
        bytesOut: extra.bytesOut ?? 0,
        replayed: extra.replayed ?? false,
        errorCode: extra.errorCode,
        cause: extra.cause,
        caller,
        traceId: span?.traceId,
        spanId: span?.spanId,
        waitMs,
        attempts,
      });
    };

    const fail = (
      code: ProxyErrorCode,
      message: string,
      extra: {
        headers?: Record<string, string | string[]> | undefined;
        retryAfterSeconds?: number | undefined;
        cause?: unknown;
      } = {},
    ) => {
      sendProxyError(res, code, message, upstreamName === NO_UPSTREAM ? undefined : upstreamName, {
        headers: extra.headers,
        retryAfterSeconds: extra.retryAfterSeconds,
        close: true,
      });
      finish(PROXY_ERROR_STATUS[code], { errorCode: code, cause: extra.cause });
    };

    client.once("close", () => {
      if (upgraded || finished) return;
      abortWait?.abort();
      if (exchange) exchange.abortFromClient();
      else finish(499, { errorCode: "client_closed" });
    });

    try {
      proceed();
    } catch (err) {
      // A bug or a failing dependency must cost one request, never the process.
      deps.logger.error({ err, upstream: upstreamName }, "upgrade handler failed");
      fail("internal_error", "internal error", { cause: err });
    }

    function proceed(): void {
      const guard = checkRequest(req, deps.limits, deps.paths, isKnownHost);
      if (guard.kind === "reject") {
        fail(guard.code, guard.message, { headers: guard.headers });
        return;
      }
      pathname = guard.pathname;
      const upstream = router.route(guard.authority, guard.pathname);
      if (!upstream) {
        fail(
          "no_route",
          `no upstream matches this request; configured routes: ${router.routesDescription}`,
        );
        return;
      }
      const requested = requestedProtocols(req.headers.upgrade);
      const allowed = requested.filter((p) => upstream.upgrades.includes(protocolName(p)));
      if (allowed.length === 0) {
        if (requested.some((p) => protocolName(p) === "websocket")) {
          upstreamName = upstream.name;
          fail(
            "upgrade_not_allowed",
            `upstream ${upstream.name} does not allow Upgrade: websocket (upgrades: [${upstream.upgrades.join(", ")}])`,
          );
          return;
        }
        // Not ours to count: the request handler logs and counts it as a plain request.
        finished = true;
        waiting--;
        deps.serveAsRequest(req, res);
        return;
      }
      serverSpan();
      upstreamName = upstream.name;
      routed = true;
      recordRequest.markInFlight(upstreamName);
      // Upgraded connections live for minutes and are not in limits.maxInFlight: their own cap.
      admitted = deps.upgradeLoad.tryEnter(deps.limits.maxUpgrades);
      if (!admitted) {
        fail(
          "too_many_upgrades",
          `the proxy holds limits.maxUpgrades (${deps.limits.maxUpgrades}) upgraded connections already`,
          { retryAfterSeconds: 1 },
        );
        return;
      }
      deps.metrics.upgradesOpen.inc();
      if (
        req.headers["transfer-encoding"] !== undefined ||
        (req.headers["content-length"] !== undefined && req.headers["content-length"] !== "0")
      ) {
        fail("bad_request", "an Upgrade request must not carry a body");
        return;
      }
      // From here the request may wait (caller check, token, turn, the upstream's answer); a
      // hang-up meanwhile closes the connection, and the 'close' listener above ends the wait.
      hangUp = watchForHangUp(client, head, () => {
        if (!finished) client.destroy();
      });
      // The same gate as a plain request: after routing, before the token is touched.
      const verdict = deps.callerGate?.check(upstream.name, req);
      const target: RoutedUpgrade = { upstream, guard, protocols: allowed };
      if (verdict === undefined) forward(target);
      else if (verdict instanceof Promise) void verdict.then((v) => admit(v, target));
      else admit(verdict, target);
    }

    function admit(verdict: GateVerdict, target: RoutedUpgrade): void {
      if (finished) return;
      caller = verdict.caller;
      if (verdict.allowed) {
        try {
          forward(target);
        } catch (err) {
          deps.logger.error({ err, upstream: upstreamName }, "upgrade handler failed");
          fail("internal_error", "internal error", { cause: err });
        }
        return;
      }
      fail(verdict.code, verdict.message, {
        headers: verdict.headers,
        retryAfterSeconds: verdict.retryAfterSeconds,
      });
    }

    function forward({ upstream, guard, protocols: allowed }: RoutedUpgrade): void {
      const injector = injectors.get(upstream.name)!;
      const injected = injector.build(req.rawHeaders, {
        remoteAddress: upstream.forwardedHeaders ? client.remoteAddress : undefined,
        authority: guard.authority,
      });
      if (injected.kind === "reject") {
        fail("bad_request", injected.message);
        return;
      }
      const tokens = deps.tokenFor(upstream.name);
      const path = upstreamPath(upstream, guard.pathAndQuery);
      const pacing = deps.pacingFor?.(upstream.name);
      /** `RateLimit-Policy` and `RateLimit` for the 101, as a plain answer carries them. */
      let rateLimitFields: string[] = [];

      const onUpgrade = (
        status: number,
        rawHeaders: readonly (Buffer | string)[],
        upstreamSocket: Duplex,
      ) => {
        if (finished || client.destroyed) {
          upstreamSocket.destroy();
          return;
        }
        upgraded = true;
        waiting--;
        if (exchange) {
          const counts = exchange.switchedProtocols(status);
          attempts = counts.attempts;
          waitMs += counts.waitedMs;
        }
        exchange = undefined;
        // The span ends with the request's answer, the 101, not with the tunnel: one open for
        // hours would reach the collector only then (or never) and read as the request's
        // latency. The tunnel's length and bytes go on the access line when it closes.
        endSpan(status);
        res.detachSocket(client);
        upstreamSocket.on("error", ignore);
        client.write(switchingProtocolsHead(rawHeaders, rateLimitFields));
        const relay = relayUpgraded({
          client,
          upstream: upstreamSocket,
          clientHead: hangUp?.release() ?? head,
          idleMs: upstream.timeouts.upgradeIdleMs,
          onClose: (outcome) => {
            relays.delete(relay);
            if (outcome.reason) {
              deps.logger.debug(
                { upstream: upstream.name, reason: outcome.reason },
                "upgraded connection closed",
              );
            }
            finish(101, {
              bytesIn: outcome.bytesIn,
              bytesOut: outcome.bytesOut,
              replayed: dispatcher.replayed,
              errorCode: outcome.reason ? RELAY_ERROR[outcome.reason] : undefined,
              cause: outcome.cause,
            });
          },
        });
        relays.add(relay);
      };
      const dispatcher = new UpgradeDispatcher(
        deps.upgradeDispatcherFor(upstream.name),
        allowed.join(", "),
        injected.authorizationIndex,
        onUpgrade,
      );

      const dispatch = (
        token: AccessToken,
        paceKey: string,
        rateLimit: string | undefined,
      ): void => {
        if (finished) return;
        if (pacing?.policy !== undefined && rateLimit !== undefined) {
          rateLimitFields = ["ratelimit-policy", pacing.policy, "ratelimit", rateLimit];
        }
        try {
          injected.headers[injected.authorizationIndex] = injector.authorization(token);
        } catch (err) {
          fail("internal_error", "the token can't be sent in a header", { cause: err });
          return;
        }
        const started = startExchange({
          req,
          res,
          upstream,
          tokens,
          dispatcher,
          freshDispatcher: dispatcher,
          method,
          path,
          headers: injected.headers,
          authorizationIndex: injected.authorizationIndex,
          dpopIndex: injected.dpopIndex,
          authorization: injector.authorization,
          token,
          body: null,
          // Until the 101 the client reads like any other; after it, upgradeIdle governs.
          minResponseRate: deps.limits.minResponseRate,
          minDataRateGraceMs: deps.limits.minDataRateGraceMs,
          // No parser is left on this connection: it closes after any answer but a 101.
          closeConnection: () => true,
          span: serverSpan(),
          pacing,
          paceKey,
          rateLimit,
          onDone: (outcome) => {
            exchange = undefined;
            attempts = outcome.attempts ?? 0;
            waitMs += outcome.waitedMs ?? 0;
            finish(outcome.status, {
              bytesOut: outcome.bytesOut,
              replayed: outcome.replayed,
              errorCode: outcome.errorCode,
              cause: outcome.cause,
            });
          },
        });
        if (!finished && !upgraded) exchange = started;
      };

      /** The pacing gate, as a plain request passes it: after the token, before the exchange. */
      const pace = (token: AccessToken): void => {
        if (finished) return;
        if (pacing === undefined) {
          dispatch(token, "", undefined);
          return;
        }
        let current = token;
        passGate(
          {
            get finished() {
              return finished;
            },
            caller,
            peer: client,
            waitSignal() {
              abortWait ??= new AbortController();
              return abortWait.signal;
            },
            leaveLoad() {
              if (!admitted) return;
              admitted = false;
              deps.upgradeLoad.leave();
              deps.metrics.upgradesOpen.dec();
            },
            resumeLoad() {
              // Unlike a plain request's, its slot is not given back whatever the load: an
              // upgraded connection lives for minutes, and maxUpgrades is all that bounds them.
              if (finished) return false;
              admitted = deps.upgradeLoad.tryEnter(deps.limits.maxUpgrades);
              if (!admitted) {
                fail(
                  "too_many_upgrades",
                  `the proxy holds limits.maxUpgrades (${deps.limits.maxUpgrades}) upgraded connections already`,
                  { retryAfterSeconds: 1 },
                );
                return false;
              }
              deps.metrics.upgradesOpen.inc();
              return true;
            },
            afterWait() {
              current = tokens.peekToken() ?? current;
            },
            proceed(_pacing, key, rateLimit, waitedMs) {
              waitMs = waitedMs;
              dispatch(current, key, rateLimit);
            },
            refuse(code, message, refusal) {
              waitMs = refusal.waitedMs;
              fail(code, message, refusal);
            },
          },
          pacing,
          budgetKey(pacing, caller, client),
          waitingPlaces,
        );
      };

      const cached = tokens.peekToken();
      if (cached) {
        pace(cached);
        return;
      }
      abortWait = new AbortController();
      const { signal } = abortWait;
      // As for a plain request (request-dispatch.ts): the wait is part of the trace.
      const wait = serverSpan().startTokenSpan(upstream.name);
      tokens
        .getToken(signal, wait)
        .then(
          (token) => {
            wait.end();
            pace(token);
          },
          (err: unknown) => {
            const mapped = mapUpstreamError(err, upstream.name);
            wait.end(signal.aborted ? "client_closed" : mapped.code);
            if (finished) return;
            fail(mapped.code, mapped.message, {
              retryAfterSeconds: mapped.retryAfterSeconds,
              cause: err,
            });
          },
        )
        // A bug after the token arrived must cost this request, never the process.
        .catch((err: unknown) => {
          deps.logger.error({ err, upstream: upstream.name }, "upgrade handler failed");
          if (!finished && !upgraded) fail("internal_error", "internal error", { cause: err });
        });
    }
  }

  handler.inFlight = () => waiting + relays.size;
  handler.destroyAll = () => {
    for (const relay of relays) relay.destroy();
  };
  return handler;
}

function ignore(): void {}
