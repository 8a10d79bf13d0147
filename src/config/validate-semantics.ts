/**
 * Rules the schema cannot express, checked on the merged document (even when it failed schema
 * validation, so every problem is reported at once; values of the wrong type are skipped here
 * because the schema already reported them).
 */

import type { KeyObject } from "node:crypto";
import { DPOP_KEYS_SUPPORTED, dpopSigningAlgorithm } from "../base/dpop-key-check.js";
import { HOP_BY_HOP_HEADERS } from "../base/hop-by-hop.js";
import { checkAcceptTokenTypes } from "./accept-token-types.js";
import { KNOWN_API_VERSIONS } from "./api-versions.js";
import { SETTINGS } from "./env-overrides.js";
import { describeValue, type IssueList, type IssuePath, isObject, toPointer } from "./issues.js";
import { DEFAULTS, KNOWN_VERSION_NAMES, type PathContext, resolveFilePath } from "./normalize.js";
import type { AssertionAlgorithm } from "./proxy-config.js";
import { checkReadableFile } from "./readable-file.js";
import { validateRedisTopology } from "./redis-topology.js";
import { didYouMean } from "./suggest.js";
import { type PemFile, type PemKind, readPemFile } from "./tls-files.js";
import { parseByteSize } from "./units.js";
import { validateBinding } from "./validate-binding.js";
import { validateCallers } from "./validate-callers.js";
import { checkClientAuth, needsSecret } from "./validate-client-auth.js";
import { durationIsZero, validateDurations } from "./validate-durations.js";
import { validateIntercept } from "./validate-intercept.js";
import { validatePacing } from "./validate-pacing.js";
import { validateRoutes } from "./validate-routes.js";

/** What the semantic checks need besides the document. */
export interface SemanticContext extends PathContext {
  /** False in sidecar mode (env/flags only): messages then name the env variables to set. */
  hasFile: boolean;
  /** The file schema as JSON (config-schema.ts): which fields are durations. */
  schema: unknown;
}

/** Smallest `maxResponseHeaderSize`: a status line and a few fields. */
const MIN_RESPONSE_HEADER_SIZE_BYTES = 1024;

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const TOKEN_PARAM_NAME = /^[A-Za-z0-9_.-]+$/;

const HOP_BY_HOP = "it is a hop-by-hop header (RFC 9110 §7.6.1), never forwarded";
const HOP_BY_HOP_NAMES = HOP_BY_HOP_HEADERS;

/** Names `headers` may not set, with the reason. */
const FORBIDDEN_HEADERS: ReadonlyMap<string, string> = new Map([
  ["authorization", "the proxy sets authorization itself"],
  ["dpop", "the proxy signs a DPoP proof for every request itself (upstreams[].dpop)"],
  ["x-version", "the proxy sets x-version from apiVersion"],
  ["host", "the proxy sets host from baseUrl"],
  ["content-length", "each request's body sets its own content-length"],
  ...HOP_BY_HOP_NAMES.map((n): [string, string] => [n, HOP_BY_HOP]),
]);

/** Names `tokenHeaders` may not set, with the reason. */
const FORBIDDEN_TOKEN_HEADERS: ReadonlyMap<string, string> = new Map([
  ["x-version", "the proxy sets x-version from apiVersion"],
  ["host", "the proxy sets host from the token URL"],
  ["content-length", "the proxy sets content-length for the token request body"],
  ["content-type", "the proxy sets content-type from tokenRequestFormat"],
  [
    "dpop",
    "the proxy signs a fresh DPoP proof for each token request when upstreams[].dpop is set (RFC 9449)",
  ],
  ...HOP_BY_HOP_NAMES.map((n): [string, string] => [n, HOP_BY_HOP]),
]);

const DPOP_ALGORITHMS: ReadonlySet<string> = new Set(["ES256", "PS256", "RS256", "EdDSA"]);

const RESERVED_TOKEN_PARAMS: ReadonlyMap<string, string> = new Map([
  ["grant_type", "the proxy always sends grant_type=client_credentials"],
  ["client_id", "use clientId or clientIdFile"],
  ["client_secret", "use clientSecret or clientSecretFile"],
  ["client_assertion", "use clientAuth: private-key-jwt or client-assertion-file"],
  ["client_assertion_type", "use clientAuth: private-key-jwt or client-assertion-file"],
  ["scope", "use the scope setting"],
]);

/** The TLS files of an upstream and what each must hold. */
const TLS_FILES: readonly [string, PemKind][] = [
  ["caFile", "ca"],
  ["certFile", "cert"],
  ["keyFile", "key"],
];

/** A file path to check for readability, and where it was written. */
interface FileRef {
  path: IssuePath;
  absolute: string;
  /** What the file must hold, beyond being readable (see tls-files.ts). */
  holds?: PemKind | undefined;
  /** A private key that parsed must also pass this (`holds: "key"` only): an issue, or undefined. */
  keyCheck?: ((key: KeyObject) => { path: IssuePath; message: string } | undefined) | undefined;
}

/** Run every semantic check; problems and warnings go to `issues`. */
export async function validateSemantics(
  doc: unknown,
  ctx: SemanticContext,
  issues: IssueList,
): Promise<void> {
  if (!isObject(doc)) return;
  const files: FileRef[] = [];
  const upstreams = Array.isArray(doc.upstreams) ? doc.upstreams : [];
  upstreams.forEach((upstream, i) => {
    if (isObject(upstream)) checkUpstream(upstream, ["upstreams", i], ctx, issues, files);
  });
  validateRoutes(doc, issues);
  validateDurations(doc, issues, ctx.schema);
  validateRedisTopology(doc, issues);
  await validateCallers(doc, ctx, issues);
  validatePacing(doc, issues);
  await validateBinding(doc, ctx, issues);
  await validateIntercept(doc, ctx, issues);
  const checked = await Promise.all(
    files.map(async (f): Promise<PemFile | { problem: string | undefined }> => {
      const unreadable = await checkReadableFile(f.absolute);
      if (unreadable !== undefined || f.holds === undefined) return { problem: unreadable };
      return readPemFile(f.absolute, f.holds);
    }),
  );
  checked.forEach((result, i) => {
    if (result.problem !== undefined) issues.add(files[i]!.path, result.problem);
    else if ("key" in result) {
      const found = files[i]!.keyCheck?.(result.key);
      if (found !== undefined) issues.add(found.path, found.message);
    }
  });
  checkKeyPairs(files, checked, issues);
}

/** A client certificate and key that both parsed must belong together. */
function checkKeyPairs(
  files: readonly FileRef[],
  checked: readonly (PemFile | { problem: string | undefined })[],
  issues: IssueList,
): void {
  const ownerOf = (file: FileRef) => toPointer(file.path.slice(0, -1));
  files.forEach((keyFile, i) => {
    const key = checked[i]!;
    if (!("key" in key)) return;
    const j = files.findIndex((f) => f.holds === "cert" && ownerOf(f) === ownerOf(keyFile));
    const cert = checked[j];
    if (!cert || !("firstCertificate" in cert)) return; // no certFile, or reported already
    if (cert.firstCertificate.checkPrivateKey(key.key)) return;
    issues.add(
      keyFile.path,
      `expected the private key of the certificate in ${certificateField(files[j]!.path)} (${files[j]!.absolute}), found another key in ${keyFile.absolute}`,
    );
  });
}

/** "tls.certFile", "tokenTls.certFile" or "clientCertificateFile": the field as written. */
function certificateField(path: IssuePath): string {
  const [parent, key] = path.slice(-2);
  return parent === "tls" || parent === "tokenTls" ? `${parent}.${key}` : String(key);
}

function checkUpstream(
  u: Record<string, unknown>,
  at: IssuePath,
  ctx: SemanticContext,
  issues: IssueList,
  files: FileRef[],
): void {
  const allowInsecure = u.allowInsecureHttp === true;
  const fromFile = (key: string) => !ctx.provenance.has(toPointer([...at, key]));
  checkUrl(
    u.baseUrl,
    [...at, "baseUrl"],
    { allowInsecure, allowQuery: false, inFile: fromFile("baseUrl") },
    issues,
  );
  // RFC 6749 §3.2: a token endpoint URL may carry a query, never a fragment.
  checkUrl(
    u.tokenUrl,
    [...at, "tokenUrl"],
    { allowInsecure, allowQuery: true, inFile: true },
    issues,
  );
  checkCredentials(u, at, ctx, issues);
  checkClientAuth(u, at, issues, (key, value) => resolveFilePath([...at, key], value, ctx));
  checkVersion(u, at, issues);

  const token = u.token;
  if (isObject(token) && Array.isArray(token.refreshWindow)) {
    const [min, max] = token.refreshWindow;
    if (typeof min === "number" && typeof max === "number" && min > max) {
      issues.add(
        [...at, "token", "refreshWindow"],
        `expected [min, max] with min ≤ max, found [${min}, ${max}]`,
      );
    }
  }
  if (isObject(token)) {
    checkAcceptTokenTypes(token.acceptTokenTypes, [...at, "token", "acceptTokenTypes"], issues);
  }
  for (const name of ["tls", "tokenTls"]) {
    const tls = u[name];
    if (!isObject(tls)) continue;
    if (tls.certFile !== undefined && tls.keyFile === undefined) {
      issues.add(
        [...at, name, "keyFile"],
        `required because ${name}.certFile is set (a client certificate needs its private key)`,
      );
    }
    if (tls.keyFile !== undefined && tls.certFile === undefined) {
      issues.add(
        [...at, name, "certFile"],
        `required because ${name}.keyFile is set (a private key needs its client certificate)`,
      );
    }
  }
  // undici refuses a zero keep-alive timeout; "keep nothing idle" is what a small value means.
  const idle = isObject(u.timeouts) ? u.timeouts.idleConnection : undefined;
  if ((typeof idle === "string" || typeof idle === "number") && durationIsZero(idle)) {
    const path = [...at, "timeouts", "idleConnection"];
    issues.add(
      path,
      `expected a duration above zero such as "1s", found ${describeValue(idle, path)}`,
    );
  }
  // A response head always needs room for a status line and a few fields; undici refuses 0.
  const headerSize = u.maxResponseHeaderSize;
  if (
    (typeof headerSize === "string" || typeof headerSize === "number") &&
    byteSizeBelow(headerSize, MIN_RESPONSE_HEADER_SIZE_BYTES)
  ) {
    const path = [...at, "maxResponseHeaderSize"];
    issues.add(
      path,
      `expected at least "1KiB" (the default is "64KiB"), found ${describeValue(headerSize, path)}`,
    );
  }
  if (isObject(u.listen) && u.listen.port === undefined) {
    issues.add([...at, "listen", "port"], "required for an upstream's own listener, found none");
  }
  checkHeaderMap(u.headers, [...at, "headers"], FORBIDDEN_HEADERS, issues);
  const tokenHeaderRules = new Map(FORBIDDEN_TOKEN_HEADERS);
  if (u.clientAuth === "basic") {
    tokenHeaderRules.set("authorization", "the proxy sets authorization for clientAuth: basic");
  }
  checkHeaderMap(u.tokenHeaders, [...at, "tokenHeaders"], tokenHeaderRules, issues);
  checkTokenParams(u.tokenParams, [...at, "tokenParams"], issues);

  for (const key of ["clientIdFile", "clientSecretFile", "clientAssertionFile"]) {
    collectFile(u, key, at, ctx, files);
  }
  collectFile(u, "clientKeyFile", at, ctx, files, "key");
  collectFile(u, "clientCertificateFile", at, ctx, files, "cert");
  if (isObject(u.dpop)) collectDpopKeyFile(u.dpop, [...at, "dpop"], ctx, files);
  for (const tlsKey of ["tls", "tokenTls"]) {
    const tls = u[tlsKey];
    if (!isObject(tls)) continue;
    for (const [key, holds] of TLS_FILES) collectFile(tls, key, [...at, tlsKey], ctx, files, holds);
  }
}

function checkUrl(
  value: unknown,
  path: IssuePath,
  /** `inFile`: the URL was written in the config file (where allowInsecureHttp can be set). */
  opts: { allowInsecure: boolean; allowQuery: boolean; inFile: boolean },
  issues: IssueList,
): void {
  if (typeof value !== "string" || value === "") return;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    issues.add(
      path,
      `expected an absolute URL such as "https://api.example.com", found ${describeValue(value, path)}`,
    );
    return;
  }
  const found = describeValue(value, path);
  if (url.protocol !== "https:" && !(opts.allowInsecure && url.protocol === "http:")) {
    const hint =
      url.protocol !== "http:"
        ? ""
        : opts.inFile
          ? "; set allowInsecureHttp: true to permit plain HTTP"
          : "; plain HTTP needs allowInsecureHttp: true in a config file";
    const expected = opts.allowInsecure ? "an https:// or http:// URL" : "an https:// URL";
    issues.add(path, `expected ${expected}, found ${found}${hint}`);
  } else if (url.protocol === "http:") {
    issues.warn(
      path,
      `plain http:// permitted by allowInsecureHttp: the client secret and tokens travel unencrypted to ${url.host}`,
    );
  }
  if (url.username !== "" || url.password !== "") {
    issues.add(
      path,
      "expected a URL without user:password@ (credentials belong in clientId/clientSecret), found credentials in it",
    );
  }
  if (!opts.allowQuery && value.includes("?")) {
    issues.add(path, "expected a URL without a query (?…), found one");
  }
  if (value.includes("#")) issues.add(path, "expected a URL without a fragment (#…), found one");
}

function checkCredentials(
  u: Record<string, unknown>,
  at: IssuePath,
  ctx: SemanticContext,
  issues: IssueList,
): void {
  for (const [inline, file] of [
    ["clientId", "clientIdFile"],
    ["clientSecret", "clientSecretFile"],
  ] as const) {
    const hasInline = u[inline] !== undefined;
    const hasFile = u[file] !== undefined;
    if (hasInline && hasFile) {
      issues.add(at, `expected exactly one of ${inline} and ${file}, found both`);
    } else if (!hasInline && !hasFile && (inline === "clientId" || needsSecret(u))) {
      const hint = ctx.hasFile
        ? ""
        : `; set ${SETTINGS[inline].env} or ${SETTINGS[file].env} (flags ${SETTINGS[inline].flag}, ${SETTINGS[file].flag})`;
      issues.add(at, `expected exactly one of ${inline} and ${file}, found neither${hint}`);
    }
  }
}

function checkVersion(u: Record<string, unknown>, at: IssuePath, issues: IssueList): void {
  const version = u.apiVersion ?? DEFAULTS.upstream.apiVersion;
  if (typeof version !== "string" || Object.hasOwn(KNOWN_API_VERSIONS, version)) return;
  if (u.tokenPath === undefined && u.tokenUrl === undefined) {
    issues.add(
      [...at, "apiVersion"],
      `expected a known version (${KNOWN_VERSION_NAMES.join(", ")}) or tokenPath/tokenUrl to go with another, found ${JSON.stringify(version)} without either${didYouMean(version, KNOWN_VERSION_NAMES)}`,
    );
  }
  if (u.tokenPath !== undefined && u.tokenUrl !== undefined) {
    issues.warn([...at, "tokenPath"], "ignored because tokenUrl is set");
  }
}

function checkHeaderMap(
  value: unknown,
  path: IssuePath,
  forbidden: ReadonlyMap<string, string>,
  issues: IssueList,
): void {
  if (!isObject(value)) return;
  const seen = new Map<string, string>();
  for (const name of Object.keys(value)) {
    const at = [...path, name];
    if (!HEADER_NAME.test(name)) {
      issues.add(
        at,
        `expected a header name (letters, digits and !#$%&'*+-.^_\`|~), found ${JSON.stringify(name)}`,
      );
      continue;
    }
    const lower = name.toLowerCase();
    const reason = forbidden.get(lower);
    if (reason !== undefined) issues.add(at, `cannot be set here: ${reason}`);
    const first = seen.get(lower);
    if (first !== undefined)
      issues.add(at, `duplicate of "${first}" (header names are case-insensitive)`);
    else seen.set(lower, name);
  }
}

function checkTokenParams(value: unknown, path: IssuePath, issues: IssueList): void {
  if (!isObject(value)) return;
  for (const name of Object.keys(value)) {
    const at = [...path, name];
    if (!TOKEN_PARAM_NAME.test(name)) {
      issues.add(
        at,
        `expected a parameter name of letters, digits, "_", "." and "-", found ${JSON.stringify(name)}`,
      );
    }
    const reason = RESERVED_TOKEN_PARAMS.get(name);
    if (reason !== undefined) issues.add(at, `cannot be set here: ${reason}`);
  }
}

function collectFile(
  owner: Record<string, unknown>,
  key: string,
  at: IssuePath,
  ctx: PathContext,
  files: FileRef[],
  holds?: PemKind,
): void {
  const value = owner[key];
  if (typeof value !== "string" || value === "") return;
  const path = [...at, key];
  files.push({ path, absolute: resolveFilePath(path, value, ctx), holds });
}

/**
 * `dpop.keyFile`: readable and a PEM private key (as clientKeyFile), and one that can sign
 * proofs with `dpop.algorithm` or the algorithm it implies (the check the key loader makes).
 */
function collectDpopKeyFile(
  dpop: Record<string, unknown>,
  at: IssuePath,
  ctx: PathContext,
  files: FileRef[],
): void {
  const before = files.length;
  collectFile(dpop, "keyFile", at, ctx, files, "key");
  const ref = files[before];
  if (ref === undefined) return;
  const configured =
    typeof dpop.algorithm === "string" && DPOP_ALGORITHMS.has(dpop.algorithm)
      ? (dpop.algorithm as AssertionAlgorithm)
      : undefined;
  ref.keyCheck = (key) => {
    const usable = dpopSigningAlgorithm(key, configured);
    if (usable.problem === undefined) return undefined;
    return {
      path: configured === undefined ? ref.path : [...at, "algorithm"],
      message: `expected a key that signs DPoP proofs (${DPOP_KEYS_SUPPORTED}), found: ${usable.problem} in ${ref.absolute}`,
    };
  };
}

/** True for a well-formed size below `min` (malformed ones are the schema's to report). */
function byteSizeBelow(value: string | number, min: number): boolean {
  try {
    return parseByteSize(value) < min;
  } catch {
    return false;
  }
}
