/**
 * The token stage (src/proxy/pipeline/token-stage.ts): a cached token goes on at once, with no
 * wait and no span; otherwise the request waits for the fetch — a token span of its trace,
 * ended when the wait ends — and goes on with the token, or is answered with the token
 * engine's error (503 `token_unavailable` with its Retry-After, 502 `token_rejected`). A client
 * hanging up ends the wait (its signal aborts) and the span says `client_closed`.
 */
import { describe, expect, it } from "vitest";
import { TokenStage } from "../../../src/proxy/pipeline/token-stage.js";
import type { AccessToken, TokenProvider } from "../../../src/token/token-provider.js";
import { makeUpstreamConfig } from "../../helpers/upstream-config.js";
import { createStubTokens, tokenRejected, tokenUnavailable } from "../stub-tokens.js";
import {
  deferred,
  errorBody,
  flushPromises,
  makeRoute,
  RecordingContext,
  RecordingFlow,
  RecordingTracing,
  TestRequest,
  testToken,
} from "../support/pipeline-fakes.js";

/** A token source whose fetch the test settles; records each getToken call. */
function pendingTokens() {
  const fetch = deferred<AccessToken>();
  const calls: { signal: AbortSignal | undefined }[] = [];
  const stub = createStubTokens();
  const tokens: TokenProvider = {
    ...stub,
    peekToken: () => undefined,
    getToken(signal) {
      calls.push({ signal });
      return fetch.promise;
    },
  };
  return { tokens, fetch, calls };
}

function routedWith(tokens: TokenProvider) {
  const tracing = new RecordingTracing();
  const test = new TestRequest({ ctx: new RecordingContext(tracing) });
  test.request.markRouted(makeRoute(makeUpstreamConfig("files"), { tokens }));
  const server = tracing.servers[0]!;
  return { test, server };
}

describe("TokenStage", () => {
  it("is named token", () => {
    expect(new TokenStage().name).toBe("token");
  });

  it("goes on at once with a cached token: no wait, no span", async () => {
    const stub = createStubTokens();
    await stub.getToken();
    const { test, server } = routedWith(stub);
    const flow = new RecordingFlow();
    new TokenStage().run(test.request, flow);
    expect(flow.passed).toEqual([test.request]);
    expect(test.request.token?.value).toBe("stub-token-1");
    expect(stub.fetches).toBe(1);
    expect(server.tokenSpans).toEqual([]);
    expect(test.request.abortWait).toBeUndefined();
  });

  it("waits for a fetch inside a token span, then goes on with the token", async () => {
    const { tokens, fetch, calls } = pendingTokens();
    const { test, server } = routedWith(tokens);
    const flow = new RecordingFlow();
    new TokenStage().run(test.request, flow);

    expect(flow.passed).toEqual([]);
    expect(calls).toHaveLength(1);
    expect(server.tokenSpans.map((s) => s.upstream)).toEqual(["files"]);
    expect(server.tokenSpans[0]!.ends).toEqual([]);

    fetch.resolve(testToken("fresh"));
    await flushPromises();
    expect(flow.passed).toEqual([test.request]);
    expect(test.request.token?.value).toBe("fresh");
    expect(server.tokenSpans[0]!.ends).toEqual([undefined]);
  });

  it("answers the token engine's failure with its code and Retry-After", async () => {
    const { tokens, fetch } = pendingTokens();
    const { test, server } = routedWith(tokens);
    const flow = new RecordingFlow();
    new TokenStage().run(test.request, flow);
    fetch.reject(tokenUnavailable(7));
    await flushPromises();

    expect(flow.passed).toEqual([]);
    const answer = test.answer();
    expect(answer.status).toBe(503);
    expect(answer.headers.get("retry-after")).toEqual(["7"]);
    expect(errorBody(answer)).toMatchObject({ code: "token_unavailable" });
    expect(server.tokenSpans[0]!.ends).toEqual(["token_unavailable"]);
    expect(test.record().cause).toBeInstanceOf(Error);
  });

  it("answers a rejected client 502 token_rejected", async () => {
    const { tokens, fetch } = pendingTokens();
    const { test } = routedWith(tokens);
    new TokenStage().run(test.request, new RecordingFlow());
    fetch.reject(tokenRejected());
    await flushPromises();
    expect(test.answer().status).toBe(502);
    expect(test.record().errorCode).toBe("token_rejected");
  });

  it("ends the wait when the client hangs up: the signal aborts, the span says client_closed", async () => {
    const { tokens, fetch, calls } = pendingTokens();
    const { test, server } = routedWith(tokens);
    const flow = new RecordingFlow();
    new TokenStage().run(test.request, flow);

    test.request.clientClosed();
    expect(calls[0]!.signal?.aborted).toBe(true);
    // The token engine rejects the aborted wait.
    fetch.reject(tokenUnavailable());
    await flushPromises();

    expect(flow.passed).toEqual([]);
    expect(test.answers()).toEqual([]);
    expect(server.tokenSpans[0]!.ends).toEqual(["client_closed"]);
    expect(test.record()).toMatchObject({ status: 499, errorCode: "client_closed" });
  });
});
