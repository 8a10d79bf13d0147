/**
 * The pass-through layer (src/proxy/exchange/layer.ts), base of every exchange layer: each of
 * undici's response callbacks goes to the next layer unchanged, and the next layer's answer
 * (backpressure) comes back unchanged; a layer overrides only what it changes.
 */
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { type AttemptHandler, ExchangeLayer } from "../../../src/proxy/exchange/layer.js";

function recordingNext(answer: boolean) {
  const calls: unknown[][] = [];
  const next: AttemptHandler = {
    onHeaders: (...args) => {
      calls.push(["onHeaders", ...args]);
      return answer;
    },
    onData: (...args) => {
      calls.push(["onData", ...args]);
      return answer;
    },
    onComplete: (...args) => {
      calls.push(["onComplete", ...args]);
    },
    onError: (...args) => {
      calls.push(["onError", ...args]);
    },
    onUpgrade: (...args) => {
      calls.push(["onUpgrade", ...args]);
    },
  };
  return { next, calls };
}

describe("ExchangeLayer", () => {
  it("passes every callback and its arguments to the next layer unchanged", () => {
    const { next, calls } = recordingNext(true);
    const layer = new ExchangeLayer(next);
    const raw = [Buffer.from("a"), Buffer.from("b")];
    const resume = () => {};
    const chunk = Buffer.from("body");
    const err = new Error("reset");
    const socket = new PassThrough();

    layer.onHeaders(200, raw, resume, "OK");
    layer.onData(chunk);
    layer.onComplete(["x-t", "1"]);
    layer.onError(err);
    layer.onUpgrade(101, raw, socket);

    expect(calls).toEqual([
      ["onHeaders", 200, raw, resume, "OK"],
      ["onData", chunk],
      ["onComplete", ["x-t", "1"]],
      ["onError", err],
      ["onUpgrade", 101, raw, socket],
    ]);
  });

  it("returns the next layer's backpressure answer", () => {
    const paused = new ExchangeLayer(recordingNext(false).next);
    expect(paused.onHeaders(200, [], () => {}, "")).toBe(false);
    expect(paused.onData(Buffer.from("x"))).toBe(false);
    const flowing = new ExchangeLayer(recordingNext(true).next);
    expect(flowing.onHeaders(200, [], () => {}, "")).toBe(true);
    expect(flowing.onData(Buffer.from("x"))).toBe(true);
  });
});
