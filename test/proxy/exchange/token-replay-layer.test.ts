/**
 * The token replay layer (src/proxy/exchange/token-replay-layer.ts), between a real exchange
 * (scripted dispatcher) and a recording sink: an upstream 401 is held, the token invalidated, a
 * fresh one fetched (inside a token span) and the request replayed exactly once with it; the
 * rejected token back, a failed fetch, or a second 401 relay the upstream's 401 unchanged; a
 * body that can't be sent again relays the 401 at once; a DPoP resource server's
 * `use_dpop_nonce` 401 gets one retry with the same token and a proof carrying the nonce; every
 * answer's DPoP-Nonce is kept; a 401 over 64 KiB passes through; a hang-up during the wait
 * ends it without a replay.
 */
import { Readable } from "node:stream";
import { beforeAll, describe, expect, it } from "vitest";
import type { UpstreamConfig } from "../../../src/config/proxy-config.js";
import type { ResendTurns } from "../../../src/proxy/exchange/exchange.js";
import { HELD_LIMIT_BYTES } from "../../../src/proxy/exchange/held-response.js";
import { TokenReplayLayer } from "../../../src/proxy/exchange/token-replay-layer.js";
import { createDpop, type Dpop } from "../../../src/token/dpop/index.js";
import type { AccessToken, TokenProvider } from "../../../src/token/token-provider.js";
import { makeUpstreamConfig } from "../../helpers/upstream-config.js";
import { createStubTokens, type StubTokens, tokenUnavailable } from "../stub-tokens.js";
import {
  codedError,
  deferred,
  exchangeRig,
  flushPromises,
  type RoutedRequestOptions,
  testToken,
} from "../support/pipeline-fakes.js";

const bearer = makeUpstreamConfig("api", { baseUrl: "https://api.example.test" });
const dpopConfig = makeUpstreamConfig("rs", { baseUrl: "https://rs.example.test", dpop: {} });

const UNAUTHORIZED = { "www-authenticate": 'Bearer error="invalid_token"' };

async function rig(
  config: UpstreamConfig,
  options: {
    tokens?: TokenProvider;
    token?: AccessToken;
    request?: RoutedRequestOptions;
    pacing?: ResendTurns;
  } = {},
) {
  const stub = createStubTokens();
  const tokens = options.tokens ?? stub;
  const token = options.token ?? (await tokens.getToken());
  const r = exchangeRig(config, { tokens, request: { ...options.request, token } });
  const layer = new TokenReplayLayer(r.sink, r.exchange);
  r.start({ head: layer, pacing: options.pacing });
  const server = r.test.ctx.tracing as unknown as {
    servers: { tokenSpans: { ends: unknown[] }[] }[];
  };
  return { ...r, stub, layer, tokenSpans: () => server.servers[0]!.tokenSpans };
}

function claimsOf(jwt: string | undefined): Record<string, unknown> {
  return JSON.parse(Buffer.from(jwt!.split(".")[1]!, "base64url").toString()) as Record<
    string,
    unknown
  >;
}

let dpop: Dpop;
beforeAll(async () => {
  dpop = await createDpop({ keyFile: undefined, algorithm: undefined });
});

describe("TokenReplayLayer", () => {
  it("holds a 401, gets a fresh token and replays once with it; the client sees only the replay's answer", async () => {
    const r = await rig(bearer);
    expect(r.dispatcher.last.header("authorization")).toBe("Bearer stub-token-1");
    const first = r.dispatcher.last.connect();
    expect(first.head(401, UNAUTHORIZED)).toBe(true);
    first.data('{"error":"invalid_token"}');
    first.complete();
    await flushPromises();

    expect(r.stub.invalidations).toBe(1);
    expect(r.dispatcher.attempts).toHaveLength(2);
    expect(r.dispatcher.last.header("authorization")).toBe("Bearer stub-token-2");
    expect(r.test.request.replayed).toBe(true);
    expect(r.exchange.token.value).toBe("stub-token-2");
    // The wait for the new token is a span of the request's trace.
    expect(r.tokenSpans().map((s) => s.ends)).toEqual([[undefined]]);
    expect(r.sink.events).toEqual([]);

    r.dispatcher.last.respond(200, {}, "ok");
    expect(r.sink.statuses()).toEqual([200]);
    expect(r.sink.body()).toBe("ok");
  });

  it("relays the 401 unchanged when the rejected token comes back (too young to drop)", async () => {
    const stub = createStubTokens();
    stub.refuseInvalidate = true;
    const r = await rig(bearer, { tokens: stub });
    r.dispatcher.last.respond(401, UNAUTHORIZED, "nope");
    await flushPromises();
    expect(r.dispatcher.attempts).toHaveLength(1);
    expect(r.sink.types()).toEqual(["headers", "data", "complete"]);
    expect(r.sink.events[0]).toMatchObject({ status: 401, headers: UNAUTHORIZED });
    expect(r.sink.body()).toBe("nope");
    expect(r.test.request.replayed).toBe(false);
  });

  it("relays the 401 when no fresh token comes (the token endpoint fails)", async () => {
    const stub = createStubTokens();
    const r = await rig(bearer, { tokens: stub });
    stub.failWith(tokenUnavailable());
    r.dispatcher.last.respond(401, UNAUTHORIZED);
    await flushPromises();
    expect(r.dispatcher.attempts).toHaveLength(1);
    expect(r.sink.statuses()).toEqual([401]);
    expect(r.tokenSpans()[0]!.ends).toEqual(["token_unavailable"]);
  });

  it("relays the replay's 401: one replay only", async () => {
    const r = await rig(bearer);
    r.dispatcher.last.respond(401, UNAUTHORIZED);
    await flushPromises();
    r.dispatcher.last.connect();
    r.dispatcher.last.head(401, UNAUTHORIZED);
    expect(r.sink.statuses()).toEqual([401]);
    r.dispatcher.last.complete();
    await flushPromises();
    expect(r.dispatcher.attempts).toHaveLength(2);
    expect(r.stub.invalidations).toBe(1);
  });

  it("replays with a token another request got meanwhile, without invalidating", async () => {
    const stub = createStubTokens();
    const r = await rig(bearer, { tokens: stub, token: testToken("older") });
    await stub.getToken();
    r.dispatcher.last.respond(401, UNAUTHORIZED);
    await flushPromises();
    expect(stub.invalidations).toBe(0);
    expect(r.dispatcher.last.header("authorization")).toBe("Bearer stub-token-1");
  });

  it("relays the 401 at once when the body can't be sent again", async () => {
    const r = await rig(bearer, { request: { method: "PUT", body: Readable.from(["x"]) } });
    r.dispatcher.last.connect();
    r.dispatcher.last.head(401, UNAUTHORIZED);
    expect(r.sink.statuses()).toEqual([401]);
    r.dispatcher.last.complete();
    await flushPromises();
    expect(r.stub.invalidations).toBe(0);
    expect(r.dispatcher.attempts).toHaveLength(1);
  });

  it("passes answers other than 401 through untouched", async () => {
    const r = await rig(bearer);
    r.dispatcher.last.connect();
    r.dispatcher.last.head(100);
    r.dispatcher.last.head(403, { "x-a": "b" });
    expect(r.sink.statuses()).toEqual([100, 403]);
  });

  it("passes a 401 over 64 KiB through without a replay", async () => {
    const r = await rig(bearer);
    const first = r.dispatcher.last.connect();
    first.head(401, UNAUTHORIZED);
    first.data(Buffer.alloc(HELD_LIMIT_BYTES, "a"));
    expect(r.sink.events).toEqual([]);
    first.data("b");
    expect(r.sink.types()).toEqual(["headers", "data", "data"]);
    first.complete();
    await flushPromises();
    expect(r.sink.types().at(-1)).toBe("complete");
    expect(r.dispatcher.attempts).toHaveLength(1);
    expect(r.stub.invalidations).toBe(0);
  });

  it("passes on an error that cuts a held 401 short, with no replay", async () => {
    const r = await rig(bearer);
    const first = r.dispatcher.last.connect();
    first.head(401, UNAUTHORIZED);
    first.error(codedError("ECONNRESET"));
    await flushPromises();
    expect(r.sink.types()).toEqual(["error"]);
    expect(r.dispatcher.attempts).toHaveLength(1);
  });

  it("waits for the pacer's turn before the replay (the upstream counts it)", async () => {
    const turns: (number | undefined)[] = [];
    const pacing: ResendTurns = {
      takeTurn(exchange, waitMs) {
        turns.push(waitMs);
        exchange.attempt();
      },
    };
    const r = await rig(bearer, { pacing });
    r.dispatcher.last.respond(401, UNAUTHORIZED);
    await flushPromises();
    expect(turns).toEqual([undefined]);
    expect(r.dispatcher.attempts).toHaveLength(2);
  });

  it("relays the held 401 when the replay gets no turn", async () => {
    const pacing: ResendTurns = { takeTurn: (_exchange, _waitMs, noTurn) => noTurn() };
    const r = await rig(bearer, { pacing });
    r.dispatcher.last.respond(401, UNAUTHORIZED, "held");
    await flushPromises();
    expect(r.dispatcher.attempts).toHaveLength(1);
    expect(r.sink.statuses()).toEqual([401]);
    expect(r.sink.body()).toBe("held");
  });

  it("ends the wait for a fresh token when the client hangs up: no replay, nothing relayed", async () => {
    const fetch = deferred<AccessToken>();
    const stub: StubTokens = createStubTokens();
    let signal: AbortSignal | undefined;
    const tokens: TokenProvider = {
      ...stub,
      peekToken: () => undefined,
      invalidate: () => true,
      getToken: (s) => {
        signal = s;
        return fetch.promise;
      },
    };
    const r = await rig(bearer, { tokens, token: testToken("rejected") });
    r.dispatcher.last.respond(401, UNAUTHORIZED);
    await flushPromises();
    r.test.request.clientClosed();
    expect(signal?.aborted).toBe(true);
    fetch.resolve(testToken("too-late"));
    await flushPromises();
    expect(r.dispatcher.attempts).toHaveLength(1);
    expect(r.sink.events).toEqual([]);
    expect(r.test.record().errorCode).toBe("client_closed");
  });

  describe("DPoP", () => {
    const NONCE_401 = {
      "www-authenticate": 'DPoP error="use_dpop_nonce", error_description="nonce required"',
      "dpop-nonce": "n-1",
    };

    function dpopToken(value = "dpop-tok"): AccessToken {
      return testToken(value, { tokenType: "DPoP", dpop });
    }

    it("retries a use_dpop_nonce 401 once with the same token and a proof carrying the nonce", async () => {
      const stub = createStubTokens();
      const r = await rig(dpopConfig, { tokens: stub, token: dpopToken() });
      const first = r.dispatcher.last;
      expect(first.header("authorization")).toBe("DPoP dpop-tok");
      expect(claimsOf(first.header("dpop")).nonce).toBeUndefined();
      first.respond(401, NONCE_401);
      await flushPromises();

      expect(r.dispatcher.attempts).toHaveLength(2);
      const retry = r.dispatcher.last;
      expect(retry.header("authorization")).toBe("DPoP dpop-tok");
      expect(claimsOf(retry.header("dpop")).nonce).toBe("n-1");
      expect(retry.header("dpop")).not.toBe(first.header("dpop"));
      expect(stub.invalidations).toBe(0);
      expect(r.test.request.replayed).toBe(false);

      retry.respond(200, {}, "ok");
      expect(r.sink.statuses()).toEqual([200]);
    });

    it("retries for a nonce once only: a second use_dpop_nonce goes to the token replay", async () => {
      // The token source has no newer token: the rejected one stays (too young to drop).
      const token = dpopToken();
      const tokens: TokenProvider = {
        ...createStubTokens(),
        peekToken: () => token,
        getToken: async () => token,
        invalidate: () => false,
      };
      const r = await rig(dpopConfig, { tokens, token });
      r.dispatcher.last.respond(401, NONCE_401);
      await flushPromises();
      r.dispatcher.last.respond(401, { ...NONCE_401, "dpop-nonce": "n-2" });
      await flushPromises();
      // No fresh token (the replay's part): the second 401 is the answer.
      expect(r.dispatcher.attempts).toHaveLength(2);
      expect(r.sink.statuses()).toEqual([401]);
    });

    it("keeps the DPoP-Nonce of every answer for the next proofs", async () => {
      const r = await rig(dpopConfig, { token: dpopToken() });
      r.dispatcher.last.respond(200, { "dpop-nonce": "n-fresh" });
      expect(dpop.nonces.get("https://rs.example.test")).toBe("n-fresh");
      expect(r.sink.statuses()).toEqual([200]);
    });

    it("relays a use_dpop_nonce 401 at once on a body that can't be sent again, keeping its nonce", async () => {
      const r = await rig(dpopConfig, {
        token: dpopToken(),
        request: { method: "POST", body: Readable.from(["x"]) },
      });
      r.dispatcher.last.connect();
      r.dispatcher.last.head(401, NONCE_401);
      expect(r.sink.statuses()).toEqual([401]);
      // Its nonce is kept all the same, for the next request.
      expect(dpop.nonces.get("https://rs.example.test")).toBe("n-1");
    });
  });
});
