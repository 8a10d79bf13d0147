/**
 * The filters and paging shared by /status (JSON), the HTML page and its in-place refresh:
 * `q` (part of the name or base URL, any case), `state` (token states, comma-separated, or
 * `failing` for failed and degraded), `mode` (prefetch | lazy), `sort` (config | name |
 * problems), `limit` and `offset`. A bad value is a 400 naming the parameter and the choices.
 */
import type { TokenState } from "../token/token-provider.js";

export const TOKEN_STATES: readonly TokenState[] = [
  "failed",
  "degraded",
  "fetching",
  "valid",
  "idle",
  "closed",
];
/** Aliases accepted by `state`. */
const STATE_ALIASES: Readonly<Record<string, readonly TokenState[]>> = {
  failing: ["failed", "degraded"],
};
export const SORTS = ["config", "name", "problems"] as const;
export type StatusSort = (typeof SORTS)[number];

/** Rows per page when `limit` is not given, and the most one request may ask for. */
export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 1000;
const MAX_QUERY_LENGTH = 200;

export interface StatusQuery {
  /** Lowercased search text; "" matches everything. */
  q: string;
  /** Token states to keep; empty keeps all. */
  states: readonly TokenState[];
  /** As given (for links and the form): "failing", "failed,degraded", … */
  stateParam: string;
  mode: "prefetch" | "lazy" | undefined;
  sort: StatusSort;
  limit: number;
  offset: number;
}

/** A query parameter that cannot be understood; the route answers 400 with the message. */
export class StatusQueryError extends Error {
  readonly statusCode = 400;
}

/** Parse the query string object fastify hands over. `defaultSort` differs for page and JSON. */
export function parseStatusQuery(
  raw: Readonly<Record<string, unknown>> | undefined,
  defaultSort: StatusSort = "config",
  defaultLimit = DEFAULT_LIMIT,
): StatusQuery {
  const q = single(raw, "q") ?? "";
  if (q.length > MAX_QUERY_LENGTH) {
    throw new StatusQueryError(`q: at most ${MAX_QUERY_LENGTH} characters`);
  }
  const stateParam = (single(raw, "state") ?? "").trim();
  const states = parseStates(stateParam);
  const modeParam = single(raw, "mode") || undefined;
  if (modeParam !== undefined && modeParam !== "prefetch" && modeParam !== "lazy") {
    throw new StatusQueryError(
      `mode: expected prefetch or lazy, found ${JSON.stringify(modeParam)}`,
    );
  }
  const sortParam = single(raw, "sort") || defaultSort;
  if (!(SORTS as readonly string[]).includes(sortParam)) {
    throw new StatusQueryError(
      `sort: expected one of ${SORTS.join(", ")}, found ${JSON.stringify(sortParam)}`,
    );
  }
  return {
    q: q.trim().toLowerCase(),
    states,
    stateParam,
    mode: modeParam,
    sort: sortParam as StatusSort,
    limit: integer(raw, "limit", defaultLimit, 1, MAX_LIMIT),
    offset: integer(raw, "offset", 0, 0, Number.MAX_SAFE_INTEGER),
  };
}

function parseStates(param: string): TokenState[] {
  if (param === "") return [];
  const states = new Set<TokenState>();
  for (const part of param.split(",")) {
    const name = part.trim().toLowerCase();
    if (name === "") continue;
    const alias = STATE_ALIASES[name];
    if (alias) {
      for (const s of alias) states.add(s);
    } else if ((TOKEN_STATES as readonly string[]).includes(name)) {
      states.add(name as TokenState);
    } else {
      throw new StatusQueryError(
        `state: expected ${[...Object.keys(STATE_ALIASES), ...TOKEN_STATES].join(", ")} (comma-separated), found ${JSON.stringify(part.trim())}`,
      );
    }
  }
  return [...states];
}

function single(
  raw: Readonly<Record<string, unknown>> | undefined,
  key: string,
): string | undefined {
  const value = raw?.[key];
  if (value === undefined) return undefined;
  if (typeof value !== "string") throw new StatusQueryError(`${key}: give it once`);
  return value;
}

function integer(
  raw: Readonly<Record<string, unknown>> | undefined,
  key: string,
  fallback: number,
  min: number,
  max: number,
): number {
  const text = single(raw, key);
  if (text === undefined || text === "") return fallback;
  if (!/^[0-9]+$/.test(text) || Number(text) < min || Number(text) > max) {
    throw new StatusQueryError(
      `${key}: expected a whole number from ${min} to ${max}, found ${JSON.stringify(text)}`,
    );
  }
  return Number(text);
}

/** What filtering and sorting need to know of one upstream. */
export interface QueryableUpstream {
  name: string;
  /** Lowercased display base URL. */
  baseUrlLower: string;
  state: TokenState;
  mode: "prefetch" | "lazy";
  /** Position in the config. */
  index: number;
  errorsPerSecond: number;
}

/** Filter, sort and page; returns the page and how many matched in all. */
export function applyStatusQuery<T extends QueryableUpstream>(
  rows: readonly T[],
  query: StatusQuery,
): { total: number; page: T[] } {
  const states = query.states.length > 0 ? new Set(query.states) : undefined;
  const matching = rows.filter(
    (row) =>
      (states === undefined || states.has(row.state)) &&
      (query.mode === undefined || row.mode === query.mode) &&
      (query.q === "" ||
        row.name.toLowerCase().includes(query.q) ||
        row.baseUrlLower.includes(query.q)),
  );
  if (query.sort === "name") {
    matching.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  } else if (query.sort === "problems") {
    matching.sort((a, b) => problemRank(a) - problemRank(b) || a.index - b.index);
  }
  return {
    total: matching.length,
    page: matching.slice(query.offset, query.offset + query.limit),
  };
}

/** Lower is worse: no token first, then failing refreshes and first fetches, then errors. */
export function problemRank(row: QueryableUpstream): number {
  switch (row.state) {
    case "failed":
      return 0;
    case "degraded":
      return 1;
    case "closed":
      return 2;
    case "fetching":
      return row.mode === "prefetch" ? 3 : 5;
    default:
      return row.errorsPerSecond > 0 ? 4 : 6;
  }
}

/** True for the upstreams the summary lists as problems. */
export function isProblem(row: QueryableUpstream): boolean {
  return problemRank(row) <= 4;
}
