/**
 * The retry layer (src/proxy/exchange/retry-layer.ts), between a real exchange (scripted
 * dispatcher) and a recording sink: a reset before any head is resent at once on a fresh
 * connection without asking the pacer (once only, without a retry policy); with a policy, later
 * retries wait a jittered backoff and take a free turn (waitMs 0) or give up; a 502–504 is held
 * and retried when `retry.on` lists it and the budget allows, else relayed intact; a request a
 * second copy could harm (POST without Idempotency-Key), a streamed body, a head already
 * relayed, an answer that paused the pacer, or spent attempts are never retried; a held 5xx
 * over 64 KiB passes through.
 */
import { Readable } from "node:stream";
import { describe, expect, it, vi } from "vitest";
import type { UpstreamConfig } from "../../../src/config/proxy-config.js";
import type { UpstreamPacing } from "../../../src/pacing/upstream-pacing.js";
import type { AttemptSpans, ResendTurns } from "../../../src/proxy/exchange/exchange.js";
import { HELD_LIMIT_BYTES } from "../../../src/proxy/exchange/held-response.js";
import { RetryLayer } from "../../../src/proxy/exchange/retry-layer.js";
import { makeUpstreamConfig } from "../../helpers/upstream-config.js";
import { waitFor } from "../../helpers/wait.js";
import {
  codedError,
  type ExchangeRigOptions,
  exchangeRig,
  flushPromises,
  makePacing,
  type RoutedRequestOptions,
} from "../support/pipeline-fakes.js";

const noPolicy = makeUpstreamConfig("plain");
const policy = makeUpstreamConfig("retrying", {
  retry: { attempts: 2, on: ["connect", "reset", "502", "503"] },
});
const resetsOnly = makeUpstreamConfig("resets-only", { retry: { attempts: 2, on: ["reset"] } });

/** A pacing role that records each resend's turn and gives it (or refuses, when told). */
function recordingTurns() {
  const turns: { waitMs: number | undefined }[] = [];
  const state = { refuse: false };
  const role: ResendTurns = {
    takeTurn(exchange, waitMs, noTurn) {
      turns.push({ waitMs });
      if (state.refuse) noTurn();
      else exchange.attempt();
    },
  };
  return { role, turns, state };
}

function recordingSpans() {
  const ends: (string | undefined)[] = [];
  const spans: AttemptSpans = {
    beginAttempt: () => {},
    endAttempt: (_status, errorCode) => {
      ends.push(errorCode);
    },
  };
  return { spans, ends };
}

/** The retry layer over a sink, in an exchange of `config` (with its pacing when it has a policy). */
function rig(
  config: UpstreamConfig,
  request: RoutedRequestOptions = {},
  options: { pacing?: UpstreamPacing | null } & ExchangeRigOptions = {},
) {
  const pacing =
    options.pacing === null
      ? undefined
      : (options.pacing ?? (config === noPolicy ? undefined : makePacing(config)));
  const r = exchangeRig(config, { ...options, pacing, request });
  const retry = new RetryLayer(r.sink, r.exchange);
  const turns = recordingTurns();
  const spans = recordingSpans();
  r.start({
    head: retry,
    retry,
    pacing: pacing === undefined ? undefined : turns.role,
    span: spans.spans,
  });
  return { ...r, retry, turns, spans };
}

const reset = () => codedError("ECONNRESET", "socket hang up");

describe("RetryLayer", () => {
  describe("without a retry policy (no pacing)", () => {
    it("resends once at once after a reset, on a fresh connection", () => {
      const r = rig(noPolicy);
      r.dispatcher.last.fail(reset());
      expect(r.fresh.attempts).toHaveLength(1);
      expect(r.fresh.last.options.reset).toBe(true);
      expect(r.sink.events).toEqual([]);
      // The failed attempt's span ended with why.
      expect(r.spans.ends).toEqual(["upstream_reset"]);

      r.fresh.last.respond(200, {}, "ok");
      expect(r.sink.statuses()).toEqual([200]);
      expect(r.sink.body()).toBe("ok");
      expect(r.test.request.attempts).toBe(2);
    });

    it("relays the second reset: one retry only", () => {
      const r = rig(noPolicy);
      r.dispatcher.last.fail(reset());
      r.fresh.last.fail(reset());
      expect(r.attempts()).toHaveLength(2);
      expect(r.sink.types()).toEqual(["error"]);
    });

    it("relays a 502 and a refused connection: only resets are retried", () => {
      const r502 = rig(noPolicy);
      r502.dispatcher.last.connect();
      r502.dispatcher.last.head(502);
      expect(r502.sink.statuses()).toEqual([502]);

      const refused = rig(noPolicy);
      refused.dispatcher.last.fail(codedError("ECONNREFUSED"));
      expect(refused.attempts()).toHaveLength(1);
      expect(refused.sink.types()).toEqual(["error"]);
    });
  });

  describe("with a retry policy", () => {
    it("resends the first reset at once on a fresh connection without asking the pacer", () => {
      const r = rig(policy);
      r.dispatcher.last.fail(reset());
      expect(r.fresh.attempts).toHaveLength(1);
      expect(r.turns.turns).toEqual([]);
    });

    it("waits a backoff before a second retry, which takes a free turn (waitMs 0)", async () => {
      const r = rig(policy);
      r.dispatcher.last.fail(reset());
      r.fresh.last.fail(reset());
      expect(r.attempts()).toHaveLength(2);
      await waitFor(() => r.attempts().length === 3, "the retry after its backoff");
      expect(r.turns.turns).toEqual([{ waitMs: 0 }]);
      expect(r.fresh.attempts).toHaveLength(2);
      expect(r.sink.events).toEqual([]);
    });

    it("relays the failure when the retry gets no turn", async () => {
      const r = rig(policy);
      r.turns.state.refuse = true;
      r.dispatcher.last.fail(reset());
      r.fresh.last.fail(reset());
      await waitFor(() => r.turns.turns.length === 1, "the retry's turn");
      expect(r.attempts()).toHaveLength(2);
      expect(r.sink.types()).toEqual(["error"]);
    });

    it("retries a refused connection after a backoff, on the pooled dispatcher", async () => {
      const r = rig(policy);
      r.dispatcher.last.fail(codedError("ECONNREFUSED"));
      expect(r.attempts()).toHaveLength(1);
      await waitFor(() => r.dispatcher.attempts.length === 2, "the retry");
      expect(r.fresh.attempts).toEqual([]);
    });

    it("holds a 502 that retry.on lists and retries it; the client sees only the answer that follows", async () => {
      const r = rig(policy);
      const first = r.dispatcher.last.connect();
      expect(first.head(502, { "content-type": "text/html" })).toBe(true);
      first.data("<h1>bad gateway</h1>");
      first.complete();
      expect(r.sink.events).toEqual([]);

      await waitFor(() => r.dispatcher.attempts.length === 2, "the retry");
      expect(r.turns.turns).toEqual([{ waitMs: 0 }]);
      r.dispatcher.last.respond(200, {}, "fine");
      expect(r.sink.statuses()).toEqual([200]);
      expect(r.sink.body()).toBe("fine");
    });

    it("relays a held 502 intact when the retry gets no turn", async () => {
      const r = rig(policy);
      r.turns.state.refuse = true;
      r.dispatcher.last.respond(502, {}, "down");
      await waitFor(() => r.sink.types().includes("complete"), "the held 502 relayed");
      expect(r.sink.statuses()).toEqual([502]);
      expect(r.sink.body()).toBe("down");
    });

    it("relays a 502 at once when retry.on does not list it", () => {
      const r = rig(resetsOnly);
      r.dispatcher.last.connect();
      r.dispatcher.last.head(502);
      expect(r.sink.statuses()).toEqual([502]);
    });

    it("relays a held 502 intact, without a retry, when the budget is spent", async () => {
      const pacing = makePacing(policy);
      const spent: UpstreamPacing = {
        ...pacing,
        budget: { ...pacing.budget, tryAcquireRetry: () => false },
      };
      const r = rig(policy, {}, { pacing: spent });
      const first = r.dispatcher.last.connect();
      first.head(502, { "x-upstream": "lb" });
      expect(r.sink.events).toEqual([]);
      first.data("down");
      first.complete();
      expect(r.sink.types()).toEqual(["headers", "data", "complete"]);
      expect(r.sink.events[0]).toMatchObject({ status: 502, headers: { "x-upstream": "lb" } });
      await flushPromises();
      expect(r.attempts()).toHaveLength(1);
    });

    it("relays a reset without a retry when the budget is spent", () => {
      const pacing = makePacing(policy);
      const r = rig(
        policy,
        {},
        {
          pacing: { ...pacing, budget: { ...pacing.budget, tryAcquireRetry: () => false } },
        },
      );
      r.dispatcher.last.fail(reset());
      expect(r.attempts()).toHaveLength(1);
      expect(r.sink.types()).toEqual(["error"]);
    });

    it("passes a held 5xx over 64 KiB through, and does not retry it", async () => {
      const r = rig(policy);
      const first = r.dispatcher.last.connect();
      first.head(503);
      first.data(Buffer.alloc(HELD_LIMIT_BYTES, "a"));
      expect(r.sink.events).toEqual([]);
      first.data("b");
      expect(r.sink.types()).toEqual(["headers", "data", "data"]);
      expect(r.sink.bytesOut).toBe(HELD_LIMIT_BYTES + 1);
      first.data("c");
      first.complete();
      expect(r.sink.types()).toEqual(["headers", "data", "data", "data", "complete"]);
      await flushPromises();
      expect(r.attempts()).toHaveLength(1);
    });

    it("never retries after a head arrived (a reset mid-body)", () => {
      const r = rig(policy);
      const first = r.dispatcher.last.connect();
      first.head(200);
      first.data("part");
      first.error(reset());
      expect(r.attempts()).toHaveLength(1);
      expect(r.sink.types()).toEqual(["headers", "data", "error"]);
    });

    it("never retries after a head arrived even when nothing was relayed yet (a reset after a paused head)", () => {
      const r = rig(policy);
      r.sink.accept = false;
      const first = r.dispatcher.last.connect();
      first.head(200);
      first.error(reset());
      expect(r.attempts()).toHaveLength(1);
    });

    it("relays an answer that paused the pacer (Retry-After) instead of holding it", () => {
      const r = rig(policy);
      const first = r.dispatcher.last.connect();
      // The pacing layer, outside this one, saw Retry-After.
      r.exchange.paused = true;
      first.head(503, { "retry-after": "5" });
      expect(r.sink.statuses()).toEqual([503]);
    });

    it("never retries a POST without an Idempotency-Key", () => {
      const reset1 = rig(policy, { method: "POST", body: Buffer.from("{}") });
      reset1.dispatcher.last.fail(reset());
      expect(reset1.attempts()).toHaveLength(1);
      expect(reset1.sink.types()).toEqual(["error"]);

      const held = rig(policy, { method: "POST", body: Buffer.from("{}") });
      held.dispatcher.last.connect();
      held.dispatcher.last.head(502);
      expect(held.sink.statuses()).toEqual([502]);
    });

    it("retries a POST that carries an Idempotency-Key", () => {
      const r = rig(policy, {
        method: "POST",
        body: Buffer.from("{}"),
        rawHeaders: ["Host", "a", "Idempotency-Key", "k-1"],
      });
      r.dispatcher.last.fail(reset());
      expect(r.fresh.attempts).toHaveLength(1);
      expect(r.fresh.last.options.body).toEqual(Buffer.from("{}"));
    });

    it("never retries a streamed body", () => {
      const r = rig(policy, { method: "PUT", body: Readable.from(["x"]) });
      r.dispatcher.last.fail(reset());
      expect(r.attempts()).toHaveLength(1);
      expect(r.sink.types()).toEqual(["error"]);
    });

    it("stops after retry.attempts and relays the last answer", async () => {
      const r = rig(policy);
      r.dispatcher.last.respond(502);
      await waitFor(() => r.dispatcher.attempts.length === 2, "retry 1");
      r.dispatcher.last.respond(502);
      await waitFor(() => r.dispatcher.attempts.length === 3, "retry 2");
      r.dispatcher.last.respond(502, {}, "third");
      await flushPromises();
      expect(r.attempts()).toHaveLength(3);
      expect(r.sink.statuses()).toEqual([502]);
      expect(r.sink.body()).toBe("third");
    });

    it("cancels a pending backoff when the exchange ends (client gone): no retry goes out", async () => {
      vi.useFakeTimers();
      try {
        const r = rig(policy);
        const deadlines = r.exchange.route.queueDeadlines;
        expect(deadlines.size).toBe(1); // the first attempt waits for a connection
        const queueDeadline = vi.getTimerCount(); // the upstream's one, armed by the first attempt
        r.dispatcher.last.fail(codedError("ECONNREFUSED"));
        // Out of the pool's queue during the backoff; the backoff is the one timer added.
        expect(deadlines.size).toBe(0);
        expect(vi.getTimerCount()).toBe(queueDeadline + 1);
        r.test.request.clientClosed();
        expect(vi.getTimerCount()).toBe(queueDeadline);
        expect(deadlines.size).toBe(0);
        await vi.advanceTimersByTimeAsync(5_000);
        expect(r.attempts()).toHaveLength(1);
        expect(r.test.record().errorCode).toBe("client_closed");
      } finally {
        vi.useRealTimers();
      }
    });

    // A refused connection never reached onConnect: its queue deadline must not fire during the
    // backoff, or a request that is not queued at all (a dispatcher without stats — a ProxyAgent —
    // or a pool with other requests queued) is answered 503 upstream_busy.
    it("keeps a refused connection's queue deadline from firing during the retry's backoff", async () => {
      vi.useFakeTimers();
      vi.spyOn(Math, "random").mockReturnValue(0.99);
      try {
        const config = makeUpstreamConfig("queued", {
          retry: { attempts: 1, on: ["connect"] },
          timeouts: { queue: "20ms" },
        });
        const r = rig(config);
        // A refused connection: undici reports it without onConnect.
        r.dispatcher.last.error(codedError("ECONNREFUSED"));
        // The backoff is ~49 ms (full jitter under 50 ms); the deadline was 20 ms from dispatch.
        await vi.advanceTimersByTimeAsync(30);
        expect(r.test.answers()).toEqual([]);
        await vi.advanceTimersByTimeAsync(30);
        expect(r.attempts()).toHaveLength(2);
      } finally {
        vi.restoreAllMocks();
        vi.useRealTimers();
      }
    });

    it("does not retry a TLS failure or a response timeout", () => {
      for (const code of ["CERT_HAS_EXPIRED", "UND_ERR_HEADERS_TIMEOUT"]) {
        const r = rig(policy);
        r.dispatcher.last.fail(codedError(code));
        expect(r.attempts()).toHaveLength(1);
        expect(r.sink.types()).toEqual(["error"]);
      }
    });
  });
});
