/**
 * A held response (src/proxy/exchange/held-response.ts): a 401 or 5xx kept back while a layer
 * decides whether to send the request again. It keeps up to 64 KiB of body (and says when it
 * outgrew that), and released it hands the next layer exactly what undici delivered — the
 * same status, raw headers, resume function and status text, every chunk in order, and the end
 * with its trailers only when complete — reporting backpressure as undici's contract wants.
 */
import { describe, expect, it } from "vitest";
import { HELD_LIMIT_BYTES, HeldResponse } from "../../../src/proxy/exchange/held-response.js";
import type { AttemptHandler } from "../../../src/proxy/exchange/layer.js";

function recordingNext(answers: { headers?: boolean; data?: boolean[] } = {}) {
  const calls: unknown[][] = [];
  let dataCalls = 0;
  const next: AttemptHandler = {
    onHeaders: (...args) => {
      calls.push(["headers", ...args]);
      return answers.headers ?? true;
    },
    onData: (chunk) => {
      calls.push(["data", chunk.toString()]);
      return answers.data?.[dataCalls++] ?? true;
    },
    onComplete: (trailers) => {
      calls.push(["complete", trailers]);
    },
    onError: (err) => {
      calls.push(["error", err]);
    },
    onUpgrade: (status) => {
      calls.push(["upgrade", status]);
    },
  };
  return { next, calls };
}

describe("HeldResponse", () => {
  it("holds 64 KiB of body, and says so once the body outgrew it", () => {
    expect(HELD_LIMIT_BYTES).toBe(64 * 1024);
    const held = new HeldResponse(502, [], () => {}, "Bad Gateway");
    expect(held.add(Buffer.alloc(HELD_LIMIT_BYTES - 1))).toBe(true);
    expect(held.add(Buffer.alloc(1))).toBe(true);
    expect(held.add(Buffer.alloc(1))).toBe(false);
  });

  it("releases exactly what it held: head, chunks in order, and the end with its trailers", () => {
    const raw = [Buffer.from("www-authenticate"), Buffer.from('Bearer error="invalid_token"')];
    const resume = () => {};
    const held = new HeldResponse(401, raw, resume, "Unauthorized");
    held.add(Buffer.from("one,"));
    held.add(Buffer.from("two"));
    held.trailers = ["x-checksum", "abc"];
    const { next, calls } = recordingNext();

    expect(held.releaseTo(next, true)).toBe(true);
    expect(calls).toEqual([
      ["headers", 401, raw, resume, "Unauthorized"],
      ["data", "one,"],
      ["data", "two"],
      ["complete", ["x-checksum", "abc"]],
    ]);
    expect(held.statusCode).toBe(401);
  });

  it("releases without the end when not complete (a body that outgrew the limit goes on)", () => {
    const held = new HeldResponse(503, [], () => {}, "");
    held.add(Buffer.from("so far"));
    const { next, calls } = recordingNext();
    held.releaseTo(next, false);
    expect(calls.map((c) => c[0])).toEqual(["headers", "data"]);
  });

  it("reports backpressure when the next layer paused on any chunk, still handing it every chunk", () => {
    const held = new HeldResponse(502, [], () => {}, "");
    held.add(Buffer.from("a"));
    held.add(Buffer.from("b"));
    held.add(Buffer.from("c"));
    const { next, calls } = recordingNext({ data: [true, false, true] });
    expect(held.releaseTo(next, true)).toBe(false);
    expect(calls.map((c) => c[0])).toEqual(["headers", "data", "data", "data", "complete"]);
  });

  it("reports backpressure when the next layer paused on the head", () => {
    const held = new HeldResponse(502, [], () => {}, "");
    const { next } = recordingNext({ headers: false });
    expect(held.releaseTo(next, true)).toBe(false);
  });
});
