/**
 * The way in of Upgrade requests (the listener's 'upgrade' event: WebSocket and other
 * `Upgrade`s, RFC 9110 §7.8). They run the plain pipeline's stages — guard, route, caller gate,
 * token, pacing turn, exchange — so each feature reaches them because they pass the same stage,
 * not because it was wired twice. What is theirs alone lives here:
 * - Node hands the connection over, parser gone: answers are written on the socket
 *   (socket-response.ts), and only once earlier pipelined answers are out;
 * - a protocol the upstream does not list in `upgrades` is ignored, as RFC 9110 §7.8 allows, and
 *   the request served as a plain one — except WebSocket, refused 501: a WebSocket client fails
 *   on any answer but 101 anyway, and the code says why;
 * - upgraded connections live for minutes and have their own bound (`limits.maxUpgrades`), a
 *   handshake carries no body, and a client hanging up while it waits is noticed;
 * - the exchange ends in a 101 hand-off: the connection is relayed byte for byte
 *   (upgrade-relay.ts), and the request's one access line is written when it closes (status
 *   101, its whole duration, bytes each way). Its SERVER span ends at the 101.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { ProcessLoad } from "../base/process-load.js";
import type { RawHeaders } from "../net/raw-headers.js";
import type { Metrics } from "../observability/metrics.js";
import { NOOP_TRACING } from "../observability/tracing.js";
import type { SwitchingProtocols } from "./exchange/response-relay.js";
import { ExchangeStage } from "./pipeline/exchange-stage.js";
import { GuardStage } from "./pipeline/guard-stage.js";
import { PacingStage } from "./pipeline/pacing-stage.js";
import { type Flow, Pipeline } from "./pipeline/pipeline.js";
import { RouteStage } from "./pipeline/route-stage.js";
import { ProxiedRequest, type RequestContext } from "./proxied-request.js";
import { type EntryDeps, stagesAfterRoute } from "./request-entry.js";
import type { Route } from "./routing/route.js";
import {
  type HangUpWatch,
  responseOnSocket,
  watchForHangUp,
  whenConnectionIdle,
} from "./socket-response.js";
import {
  type RelayOutcome,
  relayUpgraded,
  switchingProtocolsHead,
  type UpgradeRelay,
} from "./upgrade-relay.js";

export interface UpgradeEntryDeps extends EntryDeps {
  metrics: Metrics;
  /** Serves a request whose Upgrade is ignored as a plain request (the listener's request entry). */
  serveAsRequest(req: IncomingMessage, res: ServerResponse): void;
  /** Upgrades open over every listener, bounded by `limits.maxUpgrades`. */
  upgradeLoad: ProcessLoad;
}

/** An Upgrade request: its connection and what the client sent past its head. */
class UpgradeRequest extends ProxiedRequest {
  /** Reads the connection until the 101, so a hang-up while waiting is seen. */
  hangUp: HangUpWatch | undefined = undefined;

  constructor(
    req: IncomingMessage,
    res: ServerResponse,
    context: RequestContext,
    readonly client: Socket,
    readonly head: Buffer,
  ) {
    super("upgrade", req, res, context);
  }
}

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

/** How a relay's end shows in the access line. */
const RELAY_ERROR: Record<NonNullable<RelayOutcome["reason"]>, string | undefined> = {
  client_error: "client_closed",
  upstream_error: "upstream_reset",
  idle: undefined,
  shutdown: undefined,
};

export class UpgradeEntry {
  private readonly pipeline: Pipeline;
  private readonly context: RequestContext;
  private readonly relays = new Set<UpgradeRelay>();
  /** Upgrade requests waiting for their answer plus upgraded connections open. */
  private running = 0;

  constructor(private readonly deps: UpgradeEntryDeps) {
    const { limits } = deps;
    const tracing = deps.tracing ?? NOOP_TRACING;
    this.context = {
      recordRequest: deps.recordRequest,
      tracing,
      // No parser is left on these connections: every answer but a 101 closes them anyway.
      closingAll: () => true,
      onFinished: (request) => {
        this.running--;
        if (request.admitted) this.leaveLoad(request);
      },
      leaveLoad: (request) => {
        if (request.admitted) this.leaveLoad(request);
      },
      // Unlike a plain request's, its slot is not given back whatever the load: an upgraded
      // connection lives for minutes, and maxUpgrades is all that bounds them.
      resumeLoad: (request) => !request.answered && this.admit(request),
    };
    this.pipeline = new Pipeline(
      [
        new GuardStage(limits, deps.paths, deps.routes),
        new RouteStage(limits, deps.routes, (request, route) =>
          this.acceptProtocols(request, route),
        ),
        { name: "upgrade admission", run: (request, flow) => this.admitHandshake(request, flow) },
        ...stagesAfterRoute(deps),
        new PacingStage({ room: deps.lifecycle.waiting, limits }),
        new ExchangeStage(limits, tracing.enabled, (request) => this.switchingProtocols(request)),
      ],
      deps.logger,
    );
  }

  /** The listener's 'upgrade' event: Node hands the connection over with the request's head. */
  accept(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const client = socket as Socket;
    // Node removed its own error listener when it handed the socket over.
    client.on("error", ignore);
    whenConnectionIdle(client, () => {
      try {
        this.start(req, client, head);
      } catch (err) {
        // Never an exception into Node's parser callbacks: it would end the process.
        this.deps.logger.error({ err }, "upgrade handler failed");
        client.destroy();
      }
    });
  }

  inFlight(): number {
    return this.running;
  }

  /** Destroys every upgraded connection (the end of a shutdown's grace period). */
  destroyAll(): void {
    for (const relay of this.relays) relay.destroy();
  }

  private start(req: IncomingMessage, client: Socket, head: Buffer): void {
    if (client.destroyed) return;
    const res = responseOnSocket(req, client);
    const request = new UpgradeRequest(req, res, this.context, client, head);
    this.running++;
    client.once("close", () => request.clientClosed());
    this.pipeline.start(request);
  }

  /**
   * Before the request counts for its upstream: the protocols that upstream allows. Answers (501)
   * or hands on (a plain request) what it can't serve as an upgrade.
   */
  private acceptProtocols(request: ProxiedRequest, route: Route): boolean {
    const requested = requestedProtocols(request.req.headers.upgrade);
    const upgrades = route.config.upgrades;
    const allowed = requested.filter((p) => upgrades.includes(protocolName(p)));
    if (allowed.length > 0) {
      request.upgradeProtocols = allowed.join(", ");
      return true;
    }
    if (requested.some((p) => protocolName(p) === "websocket")) {
      request.upstreamName = route.name;
      request.fail(
        "upgrade_not_allowed",
        `upstream ${route.name} does not allow Upgrade: websocket (upgrades: [${upgrades.join(", ")}])`,
      );
      return false;
    }
    // Not ours to count: the request entry logs and counts it as a plain request.
    request.answered = true;
    request.finished = true;
    this.running--;
    this.deps.serveAsRequest(request.req, request.res);
    return false;
  }

  /** After routing: the upgrade's own bound, no body, and a watch on the waiting client. */
  private admitHandshake(request: ProxiedRequest, flow: Flow): void {
    const upgrade = request as UpgradeRequest;
    // Upgraded connections live for minutes and are not in limits.maxInFlight: their own cap.
    if (!this.admit(upgrade)) return;
    if (upgrade.carriesBody) {
      upgrade.fail("bad_request", "an Upgrade request must not carry a body");
      return;
    }
    // From here the request may wait (caller check, token, turn, the upstream's answer); a
    // hang-up meanwhile closes the connection, and the 'close' listener ends the wait.
    const { client } = upgrade;
    upgrade.hangUp = watchForHangUp(client, upgrade.head, () => {
      if (!upgrade.answered) client.destroy();
    });
    flow.next(upgrade);
  }

  /** Counts an upgrade in `limits.maxUpgrades`, or answers 503 `too_many_upgrades`. */
  private admit(request: ProxiedRequest): boolean {
    const { limits } = this.deps;
    request.admitted = this.deps.upgradeLoad.tryEnter(limits.maxUpgrades);
    if (!request.admitted) {
      request.fail(
        "too_many_upgrades",
        `the proxy holds limits.maxUpgrades (${limits.maxUpgrades}) upgraded connections already`,
        { retryAfterSeconds: 1 },
      );
      return false;
    }
    this.deps.metrics.upgradesOpen.inc();
    return true;
  }

  private leaveLoad(request: ProxiedRequest): void {
    request.admitted = false;
    this.deps.upgradeLoad.leave();
    this.deps.metrics.upgradesOpen.dec();
  }

  /** The upstream's 101: the connection is the client's tunnel from now on. */
  private switchingProtocols(request: ProxiedRequest): SwitchingProtocols {
    const upgrade = request as UpgradeRequest;
    return (status: number, rawHeaders: RawHeaders, upstreamSocket: Duplex) => {
      const { client, route } = upgrade;
      if (client.destroyed) {
        upstreamSocket.destroy();
        upgrade.finishClientClosed();
        return;
      }
      upgrade.answeredWith(status);
      upgrade.res.detachSocket(client);
      upstreamSocket.on("error", ignore);
      const pacing = route!.pacing;
      /** `RateLimit-Policy` and `RateLimit` for the 101, as a plain answer carries them. */
      const rateLimitFields =
        pacing?.policy !== undefined && upgrade.rateLimit !== undefined
          ? ["ratelimit-policy", pacing.policy, "ratelimit", upgrade.rateLimit]
          : [];
      client.write(switchingProtocolsHead(rawHeaders, rateLimitFields));
      const relay = relayUpgraded({
        client,
        upstream: upstreamSocket,
        clientHead: upgrade.hangUp?.release() ?? upgrade.head,
        idleMs: route!.config.timeouts.upgradeIdleMs,
        onClose: (outcome) => {
          this.relays.delete(relay);
          if (outcome.reason) {
            this.deps.logger.debug(
              { upstream: upgrade.upstreamName, reason: outcome.reason },
              "upgraded connection closed",
            );
          }
          upgrade.bytesIn = () => outcome.bytesIn;
          upgrade.finish({
            status: 101,
            bytesOut: outcome.bytesOut,
            errorCode: outcome.reason ? RELAY_ERROR[outcome.reason] : undefined,
            cause: outcome.cause,
          });
        },
      });
      this.relays.add(relay);
    };
  }
}

function ignore(): void {}
