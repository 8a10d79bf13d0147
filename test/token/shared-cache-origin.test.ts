/**
 * Issue 32: a token read from the shared Redis cache is told apart from a token endpoint request
 * in the log (`source`), the metrics (fetches count requests only; shared-cache hits apart) and
 * the source's status (where the current token came from, and when).
 */
import { afterEach, describe, expect, it } from "vitest";
import { createMetrics, type Metrics } from "../../src/observability/metrics.js";
import type {
  GetOrFetchArgs,
  SharedToken,
  SharedTokenCache,
} from "../../src/token/shared-token-cache.js";
import { createSharedTokenSourceFactory } from "../../src/token/shared-token-source.js";
import type { TokenProvider } from "../../src/token/token-provider.js";
import { FakeClock } from "../helpers/fake-clock.js";
import { captureLogs, DEFAULT_POLICY, makeSpec } from "./helpers.js";
import { IDP_ORIGIN, JSON_HEADERS, tokenBody, useMockAgent } from "./mock-idp.js";

const agent = useMockAgent();
let source: TokenProvider | undefined;
afterEach(() => source?.close());

/** A shared cache whose every call is answered by `answer` (which may ask the token endpoint). */
function setup(answer: (args: GetOrFetchArgs, clock: FakeClock) => Promise<SharedToken>) {
  const clock = new FakeClock();
  const cache: SharedTokenCache = {
    getOrFetch: (args) => answer(args, clock),
    state: () => "up",
    close: async () => {},
  };
  const logs = captureLogs();
  const metrics = createMetrics({ collectProcessMetrics: false });
  source = createSharedTokenSourceFactory(cache, () => clock.wallNow())({
    upstream: "api",
    spec: makeSpec(),
    policy: DEFAULT_POLICY,
    dispatcher: agent(),
    clock,
    logger: logs.logger,
    metrics,
    random: () => 0.5,
  });
  return { clock, source, logs, metrics };
}

function interceptTokenRequest(): void {
  agent()
    .get(IDP_ORIGIN)
    .intercept({ path: new URL(makeSpec().tokenUrl).pathname, method: "POST" })
    .reply(200, tokenBody(), JSON_HEADERS);
}

async function metricLines(metrics: Metrics): Promise<string[]> {
  return (await metrics.registry.metrics())
    .split("\n")
    .filter((line) =>
      /^bearer_proxy_token_(fetches|shared_cache|fetch_duration_seconds_count)/.test(line),
    );
}

describe("where a shared-cache replica's token came from", () => {
  it("a token another replica stored: no fetch counted, a shared-cache hit, source shared-cache", async () => {
    const { clock, source, logs, metrics } = setup(async (_args, c) => ({
      accessToken: "from-another-replica",
      tokenType: "Bearer",
      scope: "files:read",
      obtainedAtWallMs: c.wallNow() - 30_000,
      expiresAtWallMs: c.wallNow() + 570_000,
    }));
    await source.getToken();

    const status = source.status();
    expect(status).toMatchObject({ state: "valid", fetchCount: 0, sharedCacheHits: 1 });
    expect(status.origin).toEqual({
      source: "shared-cache",
      receivedAtWallMs: clock.wallNow(),
      issuedAtWallMs: clock.wallNow() - 30_000,
    });

    expect(await metricLines(metrics)).toEqual([
      'bearer_proxy_token_shared_cache_hits_total{upstream="api"} 1',
    ]);

    const line = logs.records.find((r) => r.source !== undefined);
    expect(line).toMatchObject({
      msg: "token taken from the shared cache",
      source: "shared-cache",
      issuedAgoS: 30,
    });
    expect(logs.records.some((r) => r.msg === "token fetched")).toBe(false);
  });

  it("a token this replica asked the token endpoint for: a fetch, source token-endpoint", async () => {
    interceptTokenRequest();
    const { clock, source, logs, metrics } = setup((args) => args.fetchFromIdp());
    await source.getToken();

    const status = source.status();
    expect(status).toMatchObject({ state: "valid", fetchCount: 1, sharedCacheHits: 0 });
    expect(status.origin).toEqual({
      source: "token-endpoint",
      receivedAtWallMs: clock.wallNow(),
      issuedAtWallMs: clock.wallNow(),
    });
    expect(await metricLines(metrics)).toEqual([
      'bearer_proxy_token_fetches_total{upstream="api",outcome="success"} 1',
      'bearer_proxy_token_fetch_duration_seconds_count{upstream="api"} 1',
    ]);
    expect(logs.records.find((r) => r.source !== undefined)).toMatchObject({
      msg: "token fetched",
      source: "token-endpoint",
    });
  });

  it("the origin goes with the token: none once it is dropped", async () => {
    let calls = 0;
    const { clock, source } = setup(async (_args, c) => {
      // The first call answers; the next one (after the 401) never does.
      if (++calls > 1) return new Promise<SharedToken>(() => {});
      return {
        accessToken: "rejected-later",
        tokenType: "Bearer",
        scope: undefined,
        obtainedAtWallMs: c.wallNow(),
        expiresAtWallMs: c.wallNow() + 600_000,
      };
    });
    await source.getToken();
    expect(source.status().origin?.source).toBe("shared-cache");
    await clock.advance(DEFAULT_POLICY.minAgeBeforeInvalidateMs);
    expect(source.invalidate(source.peekToken()!)).toBe(true);
    await clock.advance(0);
    expect(source.status().origin).toBeUndefined();
  });
});
