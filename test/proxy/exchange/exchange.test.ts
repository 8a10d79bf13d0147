/**
 * The exchange's core (src/proxy/exchange/exchange.ts), with a scripted dispatcher and a
 * recording sink where the relay stands: each attempt gets its credential written, a span role
 * told, and is dispatched with the route's settings (through the upgrade dispatcher for an
 * upgrade, the fresh one after a reset); a credential that can't be written, or a dispatcher
 * that throws, is answered through the request's boundary; a resend asks the pacing role for a
 * turn; the queue deadline answers 503 `upstream_busy`; a client hang-up finishes 499, aborts
 * the attempt and a resend's wait, and every later callback is ignored (onConnect throws, so
 * undici keeps its pooled connection); the exchange ends once.
 */
import { PassThrough, Readable } from "node:stream";
import type { Dispatcher } from "undici";
import { describe, expect, it, vi } from "vitest";
import type { AttemptSpans, ResendTurns } from "../../../src/proxy/exchange/exchange.js";
import { makeUpstreamConfig } from "../../helpers/upstream-config.js";
import { waitFor } from "../../helpers/wait.js";
import {
  codedError,
  errorBody,
  exchangeRig,
  ScriptedDispatcher,
  testToken,
} from "../support/pipeline-fakes.js";

const config = makeUpstreamConfig("api", {
  baseUrl: "https://api.example.test",
  timeouts: { responseHeaders: "7s", bodyIdle: "9s" },
});

/** A span role that records what the exchange told it. */
function recordingSpans() {
  const calls: unknown[][] = [];
  const spans: AttemptSpans = {
    beginAttempt: (headers, resendCount) => {
      calls.push(["begin", resendCount, headers.includes("traceparent")]);
    },
    endAttempt: (status, errorCode, protocolVersion) => {
      calls.push(["end", status, errorCode, protocolVersion]);
    },
  };
  return { spans, calls };
}

describe("Exchange", () => {
  it("sends one attempt: the credential in its slot, the route's origin, path, method, body and timeouts", () => {
    const body = Buffer.from("{}");
    const rig = exchangeRig(config, {
      request: { method: "POST", url: "/v1/items?x=1", body, token: testToken("tok-1") },
    });
    rig.start();

    const attempt = rig.dispatcher.last;
    expect(rig.attempts()).toHaveLength(1);
    expect(attempt.options).toMatchObject({
      origin: "https://api.example.test",
      path: "/v1/items?x=1",
      method: "POST",
      body,
      headersTimeout: 7_000,
      bodyTimeout: 9_000,
      reset: false,
    });
    expect(attempt.options).not.toHaveProperty("upgrade");
    expect(attempt.header("authorization")).toBe("Bearer tok-1");
    expect(rig.test.request.attempts).toBe(1);
    expect(rig.test.request.exchange).toBe(rig.exchange);
  });

  it("passes the attempt's callbacks to its head layer, and knows when a final head arrived", () => {
    const rig = exchangeRig(config);
    rig.start();
    const attempt = rig.dispatcher.last.connect();
    attempt.head(100);
    expect(rig.exchange.headArrived).toBe(false);
    attempt.head(200, { "content-type": "text/plain" });
    expect(rig.exchange.headArrived).toBe(true);
    attempt.data("hello");
    attempt.complete();
    expect(rig.sink.statuses()).toEqual([100, 200]);
    expect(rig.sink.body()).toBe("hello");
    expect(rig.exchange.finished).toBe(true);
    expect(rig.exchange.bytesOut).toBe(5);
  });

  it("answers 500 internal_error with the CredentialError's message when the token can't be written, sending nothing", () => {
    const rig = exchangeRig(config, { request: { token: testToken("has space") } });
    rig.start();
    expect(rig.attempts()).toEqual([]);
    const answer = rig.test.answer();
    expect(answer.status).toBe(500);
    expect(errorBody(answer)).toEqual({
      code: "internal_error",
      message: "the token can't be sent in a header",
      upstream: "api",
    });
    expect(answer.body).not.toContain("has space");
    expect(rig.exchange.finished).toBe(true);
    expect(rig.sink.stops).toBe(1);
  });

  it("answers with the mapped error when the dispatcher throws", () => {
    class Throwing extends ScriptedDispatcher {
      override dispatch(): boolean {
        throw codedError("ECONNREFUSED");
      }
    }
    const rig = exchangeRig(config, { dispatcher: new Throwing() });
    rig.start();
    expect(rig.test.answer().status).toBe(502);
    expect(rig.test.record().errorCode).toBe("upstream_unreachable");
  });

  it("tells the span role of each attempt before it goes, with its resend count", () => {
    const rig = exchangeRig(config);
    const { spans, calls } = recordingSpans();
    rig.start({ span: spans });
    expect(calls).toEqual([["begin", 0, false]]);
    rig.exchange.endAttempt(undefined);
    rig.exchange.resendNow(false);
    expect(calls).toEqual([
      ["begin", 0, false],
      ["end", 0, undefined, undefined],
      ["begin", 1, false],
    ]);
    expect(rig.test.request.attempts).toBe(2);
  });

  it("resends at once without pacing; through the fresh dispatcher (reset) once asked, and stays there", () => {
    const rig = exchangeRig(config);
    rig.start();
    rig.exchange.resend({ waitMs: 0 }, () => {
      throw new Error("no turn without pacing");
    });
    expect(rig.dispatcher.attempts).toHaveLength(2);
    rig.exchange.resendNow(true);
    expect(rig.fresh.attempts).toHaveLength(1);
    expect(rig.fresh.last.options.reset).toBe(true);
    rig.exchange.resend({ waitMs: 0 }, () => {});
    expect(rig.fresh.attempts).toHaveLength(2);
    // Each attempt carries its credential again.
    for (const attempt of rig.attempts())
      expect(attempt.header("authorization")).toBe("Bearer token-1");
    expect(rig.test.request.attempts).toBe(4);
  });

  it("a resend with `fresh` goes through the fresh dispatcher too", () => {
    const rig = exchangeRig(config);
    rig.start();
    rig.exchange.resend({ fresh: true, waitMs: 0 }, () => {});
    expect(rig.fresh.attempts).toHaveLength(1);
  });

  it("asks the pacing role for a resend's turn, passing the wait and the no-turn answer", () => {
    const rig = exchangeRig(config);
    const turns: { waitMs: number | undefined; noTurn: () => void }[] = [];
    const pacing: ResendTurns = {
      takeTurn: (exchange, waitMs, noTurn) => {
        expect(exchange).toBe(rig.exchange);
        turns.push({ waitMs, noTurn });
      },
    };
    rig.start({ pacing });
    let noTurns = 0;
    rig.exchange.resend({ waitMs: 0 }, () => noTurns++);
    expect(turns.map((t) => t.waitMs)).toEqual([0]);
    turns[0]!.noTurn();
    expect(noTurns).toBe(1);
    expect(rig.attempts()).toHaveLength(1);
    // resendNow does not ask (the first retry after a reset).
    rig.exchange.resendNow(true);
    expect(turns).toHaveLength(1);
    expect(rig.attempts()).toHaveLength(2);
  });

  it("sends an upgrade through the upgrade dispatcher with its Upgrade value, also when resent fresh", () => {
    const rig = exchangeRig(config, { upgrade: "websocket" });
    rig.start();
    rig.exchange.resendNow(true);
    expect(rig.dispatcher.attempts).toEqual([]);
    expect(rig.fresh.attempts).toEqual([]);
    expect(rig.upgradeDispatcher.attempts.map((a) => a.options.upgrade)).toEqual([
      "websocket",
      "websocket",
    ]);
  });

  it("knows whether its body can be sent again and, for DPoP only, the URL its proofs name", () => {
    const dpopConfig = makeUpstreamConfig("rs", { baseUrl: "https://rs.example.test", dpop: {} });
    expect(exchangeRig(config).exchange.replayable).toBe(true);
    expect(exchangeRig(config, { request: { body: Buffer.from("x") } }).exchange.replayable).toBe(
      true,
    );
    expect(
      exchangeRig(config, { request: { body: Readable.from(["x"]) } }).exchange.replayable,
    ).toBe(false);
    expect(exchangeRig(config).exchange.proofUrl).toBe("");
    const rig = exchangeRig(dpopConfig, { request: { url: "/a?b=c" } });
    expect(rig.exchange.proofUrl).toBe("https://rs.example.test/a?b=c");
  });

  it("finishes 499 when the client hangs up, aborts the attempt and a resend's wait, and ignores what comes later", () => {
    const rig = exchangeRig(config);
    rig.start();
    const attempt = rig.dispatcher.last.connect();
    const wait = rig.exchange.resendSignal();

    rig.test.request.clientClosed();

    expect(rig.test.record()).toMatchObject({ status: 499, errorCode: "client_closed" });
    expect(attempt.aborted).toBe(true);
    expect(wait.aborted).toBe(true);
    expect(rig.test.request.exchange).toBeUndefined();
    attempt.error(codedError("UND_ERR_ABORTED"));
    expect(attempt.head(200)).toBe(true);
    expect(attempt.data("late")).toBe(true);
    attempt.complete();
    expect(rig.sink.events).toEqual([]);
    expect(rig.test.answers()).toEqual([]);
  });

  it("throws from onConnect once finished, so undici drops the request and keeps its connection", () => {
    const rig = exchangeRig(config);
    rig.start();
    rig.test.request.clientClosed();
    expect(() => rig.dispatcher.last.connect()).toThrow(/abandoned/);
  });

  it("destroys an upgraded socket that arrives after the exchange finished", () => {
    const rig = exchangeRig(config, { upgrade: "websocket" });
    rig.start();
    rig.test.request.clientClosed();
    const socket = new PassThrough();
    rig.upgradeDispatcher.last.handler.onUpgrade!(101, [], socket);
    expect(socket.destroyed).toBe(true);
    expect(rig.sink.events).toEqual([]);
  });

  it("answers 503 upstream_busy with Retry-After 1 when no connection comes within timeouts.queue", async () => {
    const rig = exchangeRig(makeUpstreamConfig("busy", { timeouts: { queue: "50ms" } }));
    rig.start();
    await waitFor(() => rig.test.answers().length === 1, "the queue deadline");
    const answer = rig.test.answer();
    expect(answer.status).toBe(503);
    expect(answer.headers.get("retry-after")).toEqual(["1"]);
    expect(errorBody(answer).code).toBe("upstream_busy");
  });

  it("keeps no queue deadline once the attempt has its connection", async () => {
    const rig = exchangeRig(makeUpstreamConfig("busy", { timeouts: { queue: "50ms" } }));
    rig.start();
    rig.dispatcher.last.connect();
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(rig.test.answers()).toEqual([]);
    expect(rig.exchange.finished).toBe(false);
  });

  it("arms no queue deadline when the request was written inside dispatch (a free pooled connection)", () => {
    // undici calls onConnect from within dispatch when a pooled connection is free: the
    // common case pays no timer (issue 33).
    class ConnectingAtOnce extends ScriptedDispatcher {
      override dispatch(
        options: Dispatcher.DispatchOptions,
        handler: Dispatcher.DispatchHandler,
      ): boolean {
        super.dispatch(options, handler);
        this.last.connect();
        return true;
      }
    }
    vi.useFakeTimers();
    try {
      const rig = exchangeRig(makeUpstreamConfig("busy", { timeouts: { queue: "50ms" } }), {
        dispatcher: new ConnectingAtOnce(),
      });
      rig.start();
      expect(vi.getTimerCount()).toBe(0);
      vi.advanceTimersByTime(200);
      expect(rig.test.answers()).toEqual([]);
      expect(rig.exchange.finished).toBe(false);
    } finally {
      vi.useRealTimers();
    }
  });

  it("ends once: the attempt's span, a pending retry and the relay are stopped, a later fail is ignored", () => {
    const rig = exchangeRig(config);
    const { spans, calls } = recordingSpans();
    let cancels = 0;
    rig.start({ span: spans, retry: { cancel: () => cancels++ } });
    rig.dispatcher.last.respond(204);
    rig.exchange.fail({ code: "upstream_error", message: "late", cause: undefined });
    rig.exchange.finish({ status: 500, errorCode: undefined, cause: undefined });

    expect(calls.filter((c) => c[0] === "end")).toEqual([["end", 204, undefined, undefined]]);
    expect(cancels).toBe(1);
    expect(rig.sink.stops).toBe(1);
    expect(rig.test.record()).toMatchObject({ status: 204, errorCode: undefined });
    expect(rig.test.answers()).toEqual([]);
  });

  it("hands off an upgrade: ended with protocol 1.1, the request left to its tunnel", () => {
    const rig = exchangeRig(config, { upgrade: "websocket" });
    const { spans, calls } = recordingSpans();
    rig.start({ span: spans });
    rig.exchange.handOff();
    expect(rig.exchange.finished).toBe(true);
    expect(calls.at(-1)).toEqual(["end", 0, undefined, "1.1"]);
    // The tunnel's close writes the access line (upgrade-entry.ts), not the exchange.
    expect(rig.test.ctx.records).toEqual([]);
  });
});
