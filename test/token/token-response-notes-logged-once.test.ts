/**
 * Issue 16: a tolerated departure from RFC 6749 (no token_type: LinkedIn; a scope that is not a
 * string) is warned about once per token source, not on every refresh.
 */
import { describe, expect, it } from "vitest";
import { makeSource } from "./fake-endpoint.js";

describe("response notes", () => {
  it("each note is logged at warn once per source, however many tokens follow", async () => {
    const { clock, source, endpoint, logs } = makeSource();
    endpoint.answer = () => ({
      ...endpoint.token(60),
      notes: [
        {
          code: "token_type_missing",
          message: "token response has no token_type; treating the token as Bearer",
        },
        {
          code: "scope_not_string",
          message: "token response scope is an array, not a string; ignored",
        },
      ],
    });
    source.start();
    await clock.advance(0);
    while (endpoint.calls.length < 4) await clock.advanceToNextTimer();
    const warned = logs.records.filter((r) => typeof r.note === "string");
    expect(warned.map((r) => [r.level, r.note, r.msg])).toEqual([
      [40, "token_type_missing", "token response has no token_type; treating the token as Bearer"],
      [40, "scope_not_string", "token response scope is an array, not a string; ignored"],
    ]);
    source.close();
  });

  it("another source warns again (the set is per source)", async () => {
    for (let i = 0; i < 2; i++) {
      const { clock, source, endpoint, logs } = makeSource();
      endpoint.answer = () => ({
        ...endpoint.token(60),
        notes: [{ code: "token_type_missing", message: "no token_type" }],
      });
      source.start();
      await clock.advance(0);
      expect(logs.records.filter((r) => r.note === "token_type_missing")).toHaveLength(1);
      source.close();
    }
  });
});
