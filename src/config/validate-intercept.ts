/**
 * `intercept` and `upstreams[].intercept`: the CA must be usable (intercept-ca.ts checks it, as
 * the start does), and a CONNECT must name exactly one upstream. A terminated CONNECT is routed
 * by its authority alone (base/authority.ts), so two intercepted upstreams with one
 * authority could never both be reached, and an upstream without the CA could not be served.
 */
import { interceptAuthority } from "../base/authority.js";
import { readInterceptCa } from "./intercept-ca.js";
import { formatPath, type IssueList, type IssuePath, isObject } from "./issues.js";
import { type PathContext, resolveFilePath } from "./normalize.js";

/** Check the `intercept` block and every upstream's `intercept` of a (possibly invalid) document. */
export async function validateIntercept(
  doc: Record<string, unknown>,
  ctx: PathContext,
  issues: IssueList,
): Promise<void> {
  const block = isObject(doc.intercept) ? doc.intercept : undefined;
  const upstreams = Array.isArray(doc.upstreams) ? doc.upstreams : [];
  const firstOf = new Map<string, IssuePath>();
  let intercepted = 0;
  upstreams.forEach((upstream, i) => {
    if (!isObject(upstream) || upstream.intercept !== true) return;
    intercepted += 1;
    const at: IssuePath = ["upstreams", i, "intercept"];
    if (block === undefined) {
      issues.add(
        at,
        "needs the top-level intercept block (caCertFile and caKeyFile): the CA that signs this host's certificate",
      );
    }
    if (typeof upstream.baseUrl !== "string") return;
    const url = parseUrl(upstream.baseUrl);
    const authority = interceptAuthority(upstream.baseUrl);
    if (url === undefined || authority === undefined) return; // checkUrl reports it
    if (url.protocol !== "https:") {
      issues.add(
        at,
        `expected an https:// baseUrl (clients reach an intercepted host with https:// through CONNECT), found ${url.protocol}//`,
      );
      return;
    }
    const first = firstOf.get(authority);
    if (first !== undefined) {
      issues.add(
        at,
        `expected one intercepted upstream per authority, found ${authority} again (first: ${formatPath(first.slice(0, 2), doc)}); a CONNECT is routed by its authority alone, so set intercept on one of them`,
      );
      return;
    }
    firstOf.set(authority, at);
    const basePath = url.pathname.replace(/\/+$/, "");
    if (basePath !== "") {
      issues.warn(
        at,
        `requests inside the tunnel keep the path the client sent: the token goes with every path of ${authority}, not only under ${basePath}`,
      );
    }
  });
  if (block === undefined) return;
  if (intercepted === 0) {
    issues.warn(
      ["intercept"],
      "no upstream has intercept: true, so every CONNECT is refused (403 host_not_allowed)",
    );
  }
  await checkCaFiles(block, ctx, issues);
}

/** The CA files, checked by the loader's own function; each problem on its field. */
async function checkCaFiles(
  block: Record<string, unknown>,
  ctx: PathContext,
  issues: IssueList,
): Promise<void> {
  const { caCertFile, caKeyFile } = block;
  if (typeof caCertFile !== "string" || caCertFile === "") return;
  if (typeof caKeyFile !== "string" || caKeyFile === "") return;
  const result = await readInterceptCa({
    caCertFile: resolveFilePath(["intercept", "caCertFile"], caCertFile, ctx),
    caKeyFile: resolveFilePath(["intercept", "caKeyFile"], caKeyFile, ctx),
  });
  for (const problem of result.problems ?? []) {
    issues.add(["intercept", problem.field], problem.message);
  }
  for (const warning of result.warnings) issues.warn(["intercept", warning.field], warning.message);
}

function parseUrl(value: string): URL | undefined {
  try {
    return new URL(value);
  } catch {
    return undefined;
  }
}
