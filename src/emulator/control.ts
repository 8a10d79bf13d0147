import type { IncomingMessage, ServerResponse } from "node:http";
import type { AccessTokenAuthority } from "./access-tokens.js";
import type { EmulatorClient, EmulatorStats, TokenFaultHandler } from "./emulator-types.js";
import { pathOf, sendJson } from "./http-io.js";

/**
 * The emulator's mutable state, shared by the routes, plus the control surface that tests and
 * out-of-process users (over HTTP under `/_emulator/`) use to change it.
 */
export interface EmulatorState {
  readonly now: () => number;
  readonly tokens: AccessTokenAuthority;
  /** Configured scopes in their configured order. */
  readonly scopes: readonly string[];
  /** client_id -> client_secret. */
  clients: Map<string, string>;
  tokenLifetimeSeconds: number;
  tokenFault: TokenFaultHandler | undefined;
  /** `audience` values the token endpoints refuse (see `Emulator.refuseAudiences`). */
  refusedAudiences: ReadonlySet<string>;
  stats: EmulatorStats;
}

/** Prefix of the unauthenticated control routes. */
export const CONTROL_PREFIX = "/_emulator/";

/** Zeroed request counters. */
export function createStats(): EmulatorStats {
  return {
    tokenRequests: { total: 0, default: 0, preview: 0, form: 0, json: 0, basic: 0, rejected: 0 },
    apiRequests: 0,
    unauthorized: 0,
  };
}

/** A snapshot of the counters that later requests do not change. */
export function copyStats(stats: EmulatorStats): EmulatorStats {
  return { ...stats, tokenRequests: { ...stats.tokenRequests } };
}

/** Validate and index clients; throws TypeError on an empty id or secret or a duplicate id. */
export function indexClients(clients: readonly EmulatorClient[]): Map<string, string> {
  const byId = new Map<string, string>();
  for (const { clientId, clientSecret } of clients) {
    if (
      typeof clientId !== "string" ||
      clientId === "" ||
      typeof clientSecret !== "string" ||
      clientSecret === ""
    ) {
      throw new TypeError("emulator clients need a non-empty clientId and clientSecret");
    }
    if (byId.has(clientId)) throw new TypeError(`duplicate emulator client ${clientId}`);
    byId.set(clientId, clientSecret);
  }
  return byId;
}

/** Throws RangeError unless `seconds` is a positive integer. */
export function checkLifetime(seconds: number): number {
  if (!Number.isSafeInteger(seconds) || seconds < 1) {
    throw new RangeError("token lifetime must be a positive integer number of seconds");
  }
  return seconds;
}

/** Handle `/_emulator/*`: stats, revoke, lifetime, reset-stats. No auth: local use only. */
export function handleControl(
  state: EmulatorState,
  req: IncomingMessage,
  res: ServerResponse,
): void {
  const route = pathOf(req.url).slice(CONTROL_PREFIX.length);
  const expectedMethod = route === "stats" ? "GET" : "POST";
  if (!["stats", "revoke", "lifetime", "reset-stats"].includes(route)) {
    sendJson(res, 404, { error: "not_found", error_description: "unknown control route" });
    return;
  }
  if (req.method !== expectedMethod) {
    sendJson(
      res,
      405,
      { error: "method_not_allowed", error_description: `use ${expectedMethod}` },
      { allow: expectedMethod },
    );
    return;
  }
  // Control requests carry no body we need; let Node discard whatever was sent.
  req.resume();
  switch (route) {
    case "stats":
      sendJson(res, 200, copyStats(state.stats));
      return;
    case "revoke":
      state.tokens.revokeAll();
      sendJson(res, 200, { revoked: true });
      return;
    case "reset-stats":
      state.stats = createStats();
      sendJson(res, 200, { reset: true });
      return;
    case "lifetime": {
      const target = req.url ?? "";
      const query = target.includes("?") ? target.slice(target.indexOf("?") + 1) : "";
      const raw = new URLSearchParams(query).get("seconds");
      const seconds = raw !== null && /^\d{1,9}$/.test(raw) ? Number(raw) : Number.NaN;
      if (!Number.isSafeInteger(seconds) || seconds < 1) {
        sendJson(res, 400, {
          error: "invalid_request",
          error_description: "seconds must be a positive integer",
        });
        return;
      }
      state.tokenLifetimeSeconds = seconds;
      sendJson(res, 200, { tokenLifetimeSeconds: seconds });
      return;
    }
  }
}
