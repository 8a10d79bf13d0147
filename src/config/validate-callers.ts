/**
 * Semantic checks of caller authorization (`callers` and `upstreams[].allow`): what the schema
 * cannot say. Every rule must be usable at start — a CIDR that parses, a `user` the htpasswd
 * file defines, a service-account rule with `callers.kubernetes` set — so a typo never becomes a
 * rule that silently matches nobody (or, worse, a route left open).
 */
import { readFile } from "../base/async-fs.js";
import { parseBearerTokenFile } from "../base/bearer-token.js";
import { parseCidr } from "../base/cidr.js";
import { parseHtpasswd } from "../base/htpasswd-format.js";
import { isLoopbackListenHost } from "../base/loopback.js";
import { describeValue, type IssueList, type IssuePath, isObject } from "./issues.js";
import { type PathContext, resolveFilePath } from "./normalize.js";

export async function validateCallers(
  doc: Record<string, unknown>,
  ctx: PathContext,
  issues: IssueList,
): Promise<void> {
  const callers = isObject(doc.callers) ? doc.callers : {};
  const basic = isObject(callers.basic) ? callers.basic : undefined;
  const kubernetes = isObject(callers.kubernetes) ? callers.kubernetes : undefined;
  const users = basic ? await readUsers(basic, ctx, issues) : undefined;
  if (kubernetes) await checkKubernetes(kubernetes, ctx, issues);

  const upstreams = Array.isArray(doc.upstreams) ? doc.upstreams : [];
  upstreams.forEach((upstream, i) => {
    if (!isObject(upstream) || !Array.isArray(upstream.allow)) return;
    upstream.allow.forEach((rule, j) => {
      if (!isObject(rule)) return;
      checkRule(rule, ["upstreams", i, "allow", j], { basic, kubernetes, users }, issues);
    });
  });
  warnOpenGateway(doc, upstreams, issues);
}

interface RuleContext {
  basic: Record<string, unknown> | undefined;
  kubernetes: Record<string, unknown> | undefined;
  /** The htpasswd file's users, when it could be read. */
  users: ReadonlySet<string> | undefined;
}

function checkRule(
  rule: Record<string, unknown>,
  at: IssuePath,
  ctx: RuleContext,
  issues: IssueList,
): void {
  if (typeof rule.cidr === "string") {
    const parsed = parseCidr(rule.cidr);
    if (!parsed.ok) issues.add([...at, "cidr"], parsed.message);
  }
  if (typeof rule.user === "string") {
    if (!ctx.basic) {
      issues.add(
        [...at, "user"],
        "expected callers.basic.usersFile to be set: a user rule needs the htpasswd file that defines the user",
      );
    } else if (ctx.users && !ctx.users.has(rule.user)) {
      issues.add(
        [...at, "user"],
        `expected a user that callers.basic.usersFile defines, found ${describeValue(rule.user, [...at, "user"])} (the file defines ${ctx.users.size} user${ctx.users.size === 1 ? "" : "s"})`,
      );
    }
  }
  for (const key of ["serviceAccount", "namespace"] as const) {
    if (typeof rule[key] === "string" && !ctx.kubernetes) {
      issues.add(
        [...at, key],
        `expected callers.kubernetes to be set: a ${key} rule needs service-account tokens verified against the cluster's keys`,
      );
    }
  }
}

async function readUsers(
  basic: Record<string, unknown>,
  ctx: PathContext,
  issues: IssueList,
): Promise<ReadonlySet<string> | undefined> {
  if (typeof basic.usersFile !== "string") return undefined;
  const path: IssuePath = ["callers", "basic", "usersFile"];
  const file = resolveFilePath(path, basic.usersFile, ctx);
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    issues.add(path, `expected a readable htpasswd file, ${unreadable(error)} (${file})`);
    return undefined;
  }
  const parsed = parseHtpasswd(text, file);
  for (const problem of parsed.problems) issues.add(path, problem);
  return new Set(parsed.users.keys());
}

async function checkKubernetes(
  k8s: Record<string, unknown>,
  ctx: PathContext,
  issues: IssueList,
): Promise<void> {
  const at: IssuePath = ["callers", "kubernetes"];
  const hasFile = k8s.jwksFile !== undefined;
  const hasUri = k8s.jwksUri !== undefined;
  if (hasFile === hasUri) {
    issues.add(
      at,
      hasFile
        ? "expected exactly one of jwksFile and jwksUri, found both"
        : "expected exactly one of jwksFile and jwksUri, found neither",
    );
  }
  if (k8s.caFile !== undefined && !hasUri) {
    issues.add(
      [...at, "caFile"],
      "only used with jwksUri (it checks the JWKS server's certificate)",
    );
  }
  if (typeof k8s.caFile === "string") {
    const file = resolveFilePath([...at, "caFile"], k8s.caFile, ctx);
    try {
      await readFile(file);
    } catch (error) {
      issues.add([...at, "caFile"], `expected a readable CA file, ${unreadable(error)} (${file})`);
    }
  }
  await checkJwksTokenFile(k8s, ctx, issues);
  if (typeof k8s.jwksFile === "string") {
    const path: IssuePath = [...at, "jwksFile"];
    const file = resolveFilePath(path, k8s.jwksFile, ctx);
    const problem = await jwksFileProblem(file);
    if (problem) issues.add(path, `${problem} (${file})`);
  }
}

/**
 * `jwksTokenFile` authenticates the `jwksUri` fetch: pointless without one, and never sent over
 * plain HTTP (the schema already wants https://; this says why the token cares). The file must
 * hold a token at start; later it may rotate, and a failed read keeps the last token.
 */
async function checkJwksTokenFile(
  k8s: Record<string, unknown>,
  ctx: PathContext,
  issues: IssueList,
): Promise<void> {
  if (k8s.jwksTokenFile === undefined) return;
  const path: IssuePath = ["callers", "kubernetes", "jwksTokenFile"];
  if (k8s.jwksUri === undefined) {
    issues.add(path, "only used with jwksUri (it authenticates the JWKS fetch)");
    return;
  }
  if (typeof k8s.jwksUri === "string" && !/^https:\/\//i.test(k8s.jwksUri)) {
    issues.add(
      path,
      "refused with a jwksUri that is not https://: the token would travel in clear text",
    );
    return;
  }
  if (typeof k8s.jwksTokenFile !== "string") return;
  const file = resolveFilePath(path, k8s.jwksTokenFile, ctx);
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    issues.add(path, `expected a readable token file, ${unreadable(error)} (${file})`);
    return;
  }
  const parsed = parseBearerTokenFile(text);
  if (!parsed.ok) issues.add(path, `expected a bearer token, ${parsed.problem} (${file})`);
}

/** Why `file` is not a usable JWKS (`{"keys": [...]}`), or undefined. */
async function jwksFileProblem(file: string): Promise<string | undefined> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    return `expected a readable JWKS file, ${unreadable(error)}`;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return "expected a JWKS as JSON, found text that is not JSON";
  }
  if (!isObject(parsed) || !Array.isArray(parsed.keys) || parsed.keys.length === 0) {
    return 'expected a JWKS: a JSON object with a non-empty "keys" array';
  }
  return undefined;
}

function unreadable(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  return code === "ENOENT" ? "found no such file" : `found it unreadable (${code ?? "error"})`;
}

/**
 * Two or more upstreams reachable on a non-loopback address and not one `allow` among them:
 * anyone who reaches the port uses every credential. Legal (a NetworkPolicy may guard it), so a
 * warning, not an error; one upstream on a non-loopback listener is an exposed sidecar's choice.
 */
function warnOpenGateway(
  doc: Record<string, unknown>,
  upstreams: readonly unknown[],
  issues: IssueList,
): void {
  const mainHost =
    isObject(doc.listen) && typeof doc.listen.host === "string" ? doc.listen.host : "127.0.0.1";
  const exposed = upstreams.filter((u): u is Record<string, unknown> => {
    if (!isObject(u)) return false;
    const host = isObject(u.listen)
      ? typeof u.listen.host === "string"
        ? u.listen.host
        : "127.0.0.1"
      : mainHost;
    return !isLoopbackListenHost(host);
  });
  if (exposed.length < 2 || exposed.some((u) => Array.isArray(u.allow))) return;
  issues.warn(
    ["upstreams"],
    `${exposed.length} upstreams listen on a non-loopback address and none has an allow list: anyone who can reach the port uses every credential (see docs/callers.md)`,
  );
}
