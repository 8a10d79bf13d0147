import type { IncomingMessage, ServerResponse } from "node:http";
import { SCRIPTING_PREVIEW_HEADER } from "../config/api-versions.js";
import type { EmulatorState } from "./control.js";
import { headerValues, sendJson } from "./http-io.js";
import { handleDownload, handleEcho, handleRedirect, handleSetCookies } from "./test-routes.js";
import { DEFAULT_VERSION } from "./token-endpoint.js";

/**
 * API routes (SPEC.md "API versions") and the test routes, all behind one strict bearer check:
 * exactly `Bearer` + one space + a token this emulator issued, correctly signed, unexpired,
 * unrevoked and issued for the request's API version. `DPoP` + one space + such a token is
 * taken too, with exactly one `DPoP` header (RFC 9449 §7.1); like the token endpoint, the
 * emulator does not verify the proof (see token-endpoint.ts). Otherwise 401 with
 * `WWW-Authenticate: Bearer error="invalid_token"` (RFC 6750 §3) and a JSON body saying why.
 * The version check (400) comes before the token check: the version decides which token fits.
 */

/** Which API version a route serves: a fixed one, or whatever X-Version selects (test routes). */
type RouteVersion = typeof DEFAULT_VERSION | typeof SCRIPTING_PREVIEW_HEADER | "any";

export interface ApiRoute {
  /** Allowed methods; undefined allows any. */
  methods: readonly string[] | undefined;
  version: RouteVersion;
  handle(req: IncomingMessage, res: ServerResponse): void;
}

// RFC 6750 §2.1 b64token, after the case-sensitive scheme word and exactly one space.
const BEARER = /^(Bearer|DPoP) ([A-Za-z0-9\-._~+/]+=*)$/;
const SPREADSHEET = /^\/platform\/v1\/spreadsheets\/([^/]+)$/;
const UNAUTHORIZED_CHALLENGE = { "www-authenticate": 'Bearer error="invalid_token"' };

const scriptsRoute: ApiRoute = {
  methods: ["GET"],
  version: SCRIPTING_PREVIEW_HEADER,
  handle: (_req, res) =>
    sendJson(res, 200, {
      scripts: [
        { id: "script-1", name: "Nightly export", runtime: "js" },
        { id: "script-2", name: "Sheet cleanup", runtime: "js" },
      ],
    }),
};
const echoRoute: ApiRoute = { methods: undefined, version: "any", handle: handleEcho };
const downloadRoute: ApiRoute = { methods: ["GET"], version: "any", handle: handleDownload };
const redirectRoute: ApiRoute = { methods: ["GET"], version: "any", handle: handleRedirect };
const setCookiesRoute: ApiRoute = { methods: ["GET"], version: "any", handle: handleSetCookies };

/** The route serving a path (without query), or undefined for 404. */
export function matchApiRoute(path: string): ApiRoute | undefined {
  if (path === "/scripts") return scriptsRoute;
  if (path === "/echo" || path.startsWith("/echo/")) return echoRoute;
  if (path.startsWith("/download/")) return downloadRoute;
  if (path === "/redirect") return redirectRoute;
  if (path === "/set-cookies") return setCookiesRoute;
  const sheet = SPREADSHEET.exec(path);
  if (sheet) return spreadsheetRoute(sheet[1]!);
  return undefined;
}

function spreadsheetRoute(rawId: string): ApiRoute {
  let id: string;
  try {
    id = decodeURIComponent(rawId);
  } catch {
    id = rawId;
  }
  return {
    methods: ["GET"],
    version: DEFAULT_VERSION,
    handle: (_req, res) =>
      sendJson(res, 200, {
        id,
        title: `Spreadsheet ${id}`,
        sheets: [
          { id: 0, title: "Sheet1", rowCount: 100, columnCount: 26 },
          { id: 1, title: "Summary", rowCount: 10, columnCount: 4 },
        ],
      }),
  };
}

/** Serve a request to a matched route: method, version, bearer token, then the handler. */
export function handleApiRequest(
  state: EmulatorState,
  req: IncomingMessage,
  res: ServerResponse,
  route: ApiRoute,
): void {
  state.stats.apiRequests++;
  const method = req.method ?? "";
  if (route.methods && !route.methods.includes(method)) {
    const allow = route.methods.join(", ");
    sendJson(
      res,
      405,
      { error: "method_not_allowed", error_description: `use ${allow}` },
      { allow },
    );
    return;
  }
  const version = requestVersion(req, route.version);
  if (!version.ok) {
    sendJson(res, 400, { error: "invalid_version", error_description: version.description });
    return;
  }
  const denial = checkBearer(state, req, version.value);
  if (denial !== undefined) {
    state.stats.unauthorized++;
    sendJson(
      res,
      401,
      { error: "invalid_token", error_description: denial },
      UNAUTHORIZED_CHALLENGE,
    );
    return;
  }
  route.handle(req, res);
}

function requestVersion(
  req: IncomingMessage,
  routeVersion: RouteVersion,
): { ok: true; value: string } | { ok: false; description: string } {
  const sent = headerValues(req, "x-version");
  if (sent.length > 1) return { ok: false, description: "more than one X-Version header" };
  const [header] = sent;
  if (routeVersion === "any") return { ok: true, value: header ?? DEFAULT_VERSION };
  if (routeVersion === DEFAULT_VERSION) {
    return header === undefined
      ? { ok: true, value: DEFAULT_VERSION }
      : {
          ok: false,
          description:
            "this route belongs to the default API version and takes no X-Version header",
        };
  }
  return header === routeVersion
    ? { ok: true, value: routeVersion }
    : { ok: false, description: `this route requires the header X-Version: ${routeVersion}` };
}

/** Why the request's credentials are refused, or undefined if they are good. */
function checkBearer(
  state: EmulatorState,
  req: IncomingMessage,
  version: string,
): string | undefined {
  const headers = headerValues(req, "authorization");
  if (headers.length === 0) return "missing Authorization header";
  if (headers.length > 1) return "more than one Authorization header";
  const match = BEARER.exec(headers[0]!);
  if (!match)
    return "Authorization must be the word Bearer (or DPoP), exactly one space, then the token";
  if (match[1] === "DPoP" && headerValues(req, "dpop").length !== 1) {
    return "Authorization: DPoP needs exactly one DPoP proof header";
  }
  const check = state.tokens.verify(match[2]!, version);
  if (check.ok) return undefined;
  return check.detail ? `${check.reason}: ${check.detail}` : check.reason;
}
