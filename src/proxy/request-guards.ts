/**
 * Checks on an incoming request that Node's parser (llhttp, strict mode) leaves to us, per
 * RFC 9112 and our own limits: version, Host, header count, target length and form, methods a
 * credential-injecting proxy must refuse, and dot-segments; then the path is normalized, once, for
 * everything after (path-normalization.ts). Parse errors llhttp does catch (CL+TE, duplicate
 * Content-Length, obs-fold, bare CR, …) arrive as `clientError`; see client-errors.ts.
 */
import type { IncomingMessage } from "node:http";
import { ESCAPED_SLASH, normalizePath } from "../base/path-normalization.js";
import type { LimitsConfig, PathsConfig } from "../config/proxy-config.js";
import type { ProxyErrorCode } from "../errors.js";
import { isFieldName } from "../net/raw-headers.js";

/** A request the guards accepted: where it goes and what to send. */
export interface AcceptedTarget {
  kind: "ok";
  /** Authority used for routing: the absolute-form URI's, else the Host header (or none). */
  authority: string | undefined;
  /**
   * The normalized path and the query as it came (byte-exact), always starting with "/": what
   * is routed, logged and forwarded. Nothing after the guards decodes it again.
   */
  pathAndQuery: string;
  /** The normalized path only (before "?"), for routing and logs. */
  pathname: string;
  /** True for `GET http://host/path` (HTTP_PROXY mode). */
  absoluteForm: boolean;
}

export interface RejectedRequest {
  kind: "reject";
  code: ProxyErrorCode;
  message: string;
  headers?: Record<string, string>;
}

export type GuardResult = AcceptedTarget | RejectedRequest;

const reject = (
  code: ProxyErrorCode,
  message: string,
  headers?: Record<string, string>,
): RejectedRequest =>
  headers ? { kind: "reject", code, message, headers } : { kind: "reject", code, message };

/** reg-name or IPv4 (RFC 3986 §3.2.2 without percent-encoding), optional port. */
const HOST_HEADER = /^(?:[a-z0-9](?:[a-z0-9._~!$&'()*+,;=-]*)|\[[0-9a-f:.]+\])(?::[0-9]{0,5})?$/i;
/** The Host value that last passed HOST_HEADER (one string: a cache that can't grow). */
let lastValidHost: string | undefined;
/** The only authority an absolute-form target may carry: a DNS-ish name and an optional port. */
const ABSOLUTE_AUTHORITY = /^[a-z0-9](?:[a-z0-9.-]*)(?::[0-9]{1,5})?$/i;
/** Dotted-quad, or all-digit / hex host names that resolvers read as IPv4 (`2130706433`, `0x7f.1`). */
const IPV4_LIKE = /^(?:(?:0x[0-9a-f]*|[0-9]+)\.){0,3}(?:0x[0-9a-f]*|[0-9]+)$/i;

/**
 * A dot-segment (`.` or `..`) anywhere in the path, also followed by `;params` (servlet
 * containers treat `..;` as `..`). Prefix routing must not let a path climb out of its prefix on
 * an upstream that normalises.
 */
const DOT_SEGMENT = /(?:^|\/)\.{1,2}(?:[/;]|$)/;

/**
 * Percent-encoded `.`, `/`, `\` and `;`, also double-encoded (`%252e`): many upstreams and load
 * balancers decode them before resolving the path, so `..%2f`, `%2e%2e/` or `..%5c` climb out of
 * a prefix as surely as `../` does.
 */
const ENCODED_PATH_DELIMITER = /%(?:25)*(2e|2f|5c|3b)/gi;

/** The path as an upstream that decodes delimiters would see it; for the check only. */
function decodePathDelimiters(pathname: string): string {
  return pathname.replace(ENCODED_PATH_DELIMITER, (_match, hex: string) =>
    String.fromCharCode(Number.parseInt(hex, 16)),
  );
}

/**
 * True if the path part of a target contains a dot-segment or a backslash, literal or
 * percent-encoded (double-encoded too). Checked on the path as it came: normalization decodes
 * less than this check does, so it can't make a refused path acceptable, nor an accepted one
 * unsafe.
 */
export function hasUnsafePathSegment(pathname: string): boolean {
  const decoded = pathname.includes("%") ? decodePathDelimiters(pathname) : pathname;
  return DOT_SEGMENT.test(decoded) || decoded.includes("\\");
}

const CONNECT_MESSAGE =
  "CONNECT is not supported: an HTTPS tunnel can't carry an injected token. Use plain http:// URLs through this proxy; it forwards them to the upstream over HTTPS.";

/** The first thing checked: methods this proxy refuses, before anything else is read. */
function checkMethod(method: string | undefined): RejectedRequest | undefined {
  if (method === "TRACE") {
    // A TRACE echo would reflect the injected credential back to the client.
    return reject("method_not_allowed", "TRACE is not allowed through this proxy", {
      allow: "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS",
    });
  }
  if (method === "CONNECT") return connectRejection();
  return undefined;
}

/** The answer to CONNECT (also used by the server's `connect` listener). */
export function connectRejection(): RejectedRequest {
  return reject("method_not_allowed", CONNECT_MESSAGE, {
    allow: "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS",
  });
}

/**
 * Version, Host and header-count checks on the raw header list. Node accepts HTTP/0.9 and
 * `HTTP/2.0` request lines, keeps duplicate Host headers, and only counts headers up to
 * `maxHeadersCount` (set one above our limit, so exceeding it is visible here).
 */
function checkHeaders(
  req: IncomingMessage,
  limits: LimitsConfig,
): RejectedRequest | string | undefined {
  if (req.httpVersionMajor !== 1 || (req.httpVersionMinor !== 0 && req.httpVersionMinor !== 1)) {
    return reject("bad_request", "only HTTP/1.0 and HTTP/1.1 are supported");
  }
  const raw = req.rawHeaders;
  if (raw.length / 2 > limits.maxHeaderCount) {
    return reject(
      "header_fields_too_large",
      `too many header fields (limit ${limits.maxHeaderCount})`,
    );
  }
  let host: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (isFieldName(name, "host")) {
      if (host !== undefined) return reject("bad_request", "duplicate Host header");
      host = raw[i + 1]!;
    }
  }
  if (host === undefined) {
    // Node already answers 400 to an HTTP/1.1 request without Host (requireHostHeader).
    if (req.httpVersionMinor === 1) return reject("bad_request", "missing Host header");
    return undefined;
  }
  // A keep-alive client sends the same Host on every request: checked once, not each time.
  if (host === lastValidHost) return host;
  if (!HOST_HEADER.test(host)) return reject("bad_request", "invalid Host header");
  lastValidHost = host;
  return host;
}

/**
 * Transfer-Encoding (llhttp already refuses a repeated `chunked` and TE with Content-Length):
 * RFC 9112 §6.3 — chunked not final → 400 (the body length is unknowable); §6.1 — a coding we
 * don't implement before a final chunked → 501.
 */
function checkTransferEncoding(req: IncomingMessage): RejectedRequest | undefined {
  const te = req.headers["transfer-encoding"];
  if (te === undefined) return undefined;
  const codings = te
    .toLowerCase()
    .split(",")
    .map((c) => c.trim());
  if (codings[codings.length - 1] !== "chunked") {
    return reject("bad_request", "Transfer-Encoding must end with chunked");
  }
  if (codings.length > 1) {
    return reject("not_implemented", "only the chunked transfer coding is supported");
  }
  return undefined;
}

/** Parses an absolute-form `http://authority/path?query` target (RFC 9112 §3.2.2). */
function parseAbsoluteForm(
  target: string,
  isKnownHost: (authority: string) => boolean,
): GuardResult {
  const schemeEnd = target.indexOf("://");
  const scheme = target.slice(0, schemeEnd).toLowerCase();
  if (scheme === "https") {
    return reject(
      "bad_request",
      "https:// targets can't be proxied (the client would expect end-to-end TLS); send http:// URLs to this proxy, it uses HTTPS to the upstream",
    );
  }
  if (scheme !== "http")
    return reject("bad_request", "only http:// absolute-form targets are supported");
  const rest = target.slice(schemeEnd + 3);
  let authorityEnd = rest.length;
  for (let i = 0; i < rest.length; i++) {
    const c = rest.charCodeAt(i);
    if (c === 0x2f /* / */ || c === 0x3f /* ? */) {
      authorityEnd = i;
      break;
    }
  }
  const authority = rest.slice(0, authorityEnd);
  if (authority.includes("@"))
    return reject("bad_request", "userinfo is not allowed in the target URI");
  if (authority.startsWith("["))
    return reject("bad_request", `IP-literal targets are not allowed${localHint(authority)}`);
  if (!ABSOLUTE_AUTHORITY.test(authority))
    return reject("bad_request", "invalid authority in the target URI");
  const hostname = authority.replace(/:[0-9]*$/, "");
  if (!isKnownHost(authority)) {
    if (IPV4_LIKE.test(hostname))
      return reject("bad_request", `IP-literal targets are not allowed${localHint(hostname)}`);
    // The authority as the client sent it: "sheets.internal" alone would read as an unknown name
    // when only its port differs from match.hosts (where no port means 80).
    const otherPort =
      hostname !== authority && isKnownHost(hostname)
        ? ` (match.hosts names ${hostname}, which means port 80; list "${authority}" to serve this one)`
        : "";
    return reject(
      "host_not_allowed",
      `host ${authority} is not served by this proxy${otherPort}${localHint(hostname)}`,
    );
  }
  let pathAndQuery = rest.slice(authorityEnd);
  if (pathAndQuery === "" || pathAndQuery.startsWith("?")) pathAndQuery = `/${pathAndQuery}`;
  return {
    kind: "ok",
    authority,
    pathAndQuery,
    pathname: pathnameOf(pathAndQuery),
    absoluteForm: true,
  };
}

function pathnameOf(pathAndQuery: string): string {
  const q = pathAndQuery.indexOf("?");
  return q === -1 ? pathAndQuery : pathAndQuery.slice(0, q);
}

/**
 * Runs every check on a parsed request and normalizes its path by `paths`. `isKnownHost` says
 * whether an authority is in some `match.hosts` of this listener: absolute-form requests for any
 * other host are refused before any connection is made (never an open proxy).
 */
export function checkRequest(
  req: IncomingMessage,
  limits: LimitsConfig,
  paths: PathsConfig,
  isKnownHost: (authority: string) => boolean,
): GuardResult {
  const methodRejection = checkMethod(req.method);
  if (methodRejection) return methodRejection;
  const host = checkHeaders(req, limits);
  if (typeof host === "object") return host;
  const teRejection = checkTransferEncoding(req);
  if (teRejection) return teRejection;

  const target = req.url ?? "";
  if (target.length > limits.maxUrlLengthBytes) {
    return reject("uri_too_long", `request target longer than ${limits.maxUrlLengthBytes} bytes`);
  }
  if (target.includes("#"))
    return reject("bad_request", "a request target must not contain a fragment");
  let accepted: GuardResult;
  if (target.startsWith("/")) {
    accepted = {
      kind: "ok",
      authority: host,
      pathAndQuery: target,
      pathname: pathnameOf(target),
      absoluteForm: false,
    };
  } else if (/^[a-z][a-z0-9+.-]*:\/\//i.test(target)) {
    // The client's Host header is ignored: the URI's authority decides (RFC 9112 §3.2.2).
    accepted = parseAbsoluteForm(target, isKnownHost);
    if (accepted.kind === "reject") return accepted;
  } else if (target === "*") {
    return reject("bad_request", "asterisk-form (OPTIONS *) is not supported by this proxy");
  } else {
    return reject("bad_request", "unsupported request target form");
  }
  if (hasUnsafePathSegment(accepted.pathname)) {
    return reject("bad_request", "dot-segments and backslashes are not allowed in the path");
  }
  return normalizeTarget(accepted, paths);
}

/** The accepted target with its path normalized, the query kept as it came. */
function normalizeTarget(accepted: AcceptedTarget, paths: PathsConfig): GuardResult {
  const normalized = normalizePath(accepted.pathname, paths);
  if (normalized === accepted.pathname) return accepted;
  if (typeof normalized !== "string") {
    return normalized === ESCAPED_SLASH
      ? reject(
          "ambiguous_path",
          "an encoded slash (%2F) in the path is refused (paths.escapedSlashes: reject): upstreams disagree on whether it separates segments",
        )
      : reject("bad_request", "a % in the path must be followed by two hex digits");
  }
  accepted.pathAndQuery = normalized + accepted.pathAndQuery.slice(accepted.pathname.length);
  accepted.pathname = normalized;
  return accepted;
}

/**
 * Issue 15: with `http_proxy` set, a client's call to a local URL — the proxy's own admin port,
 * say — arrives here as an absolute-form request. The admin endpoints are not served through the
 * proxy listener on purpose (it would expose /quitquitquit to whoever may send requests), so the
 * refusal says how to bypass the proxy for local addresses.
 */
function localHint(host: string): string {
  const lower = host.toLowerCase();
  const local = lower === "localhost" || lower.startsWith("127.") || lower.startsWith("[::1]");
  return local
    ? " (a local address reached through http_proxy? exclude it: no_proxy=127.0.0.1,localhost)"
    : "";
}
