/**
 * The sustained-overload window behind /readyz (proxy/overload.ts), on a fake clock: a burst
 * of refusals is not sustained overload; refusals without a pause for the whole window are;
 * a pause of over a second starts the window again.
 */
import { describe, expect, it } from "vitest";
import { createProcessLoad } from "../../src/base/process-load.js";

describe("process load", () => {
  it("admits up to the limit, refuses beyond it, and 0 means no limit", () => {
    const load = createProcessLoad(() => 0);
    expect(load.tryEnter(2)).toBe(true);
    expect(load.tryEnter(2)).toBe(true);
    expect(load.tryEnter(2)).toBe(false);
    expect(load.inFlight).toBe(2);
    load.leave();
    expect(load.tryEnter(2)).toBe(true);
    expect(load.tryEnter(0)).toBe(true);
    expect(load.inFlight).toBe(3);
  });

  it("reports overload only once refusals have lasted the window without a pause", () => {
    let now = 0;
    const load = createProcessLoad(() => now);
    load.tryEnter(1);
    expect(load.tryEnter(1)).toBe(false);
    expect(load.overloadedFor(3_000)).toBe(false);
    for (now = 500; now <= 3_000; now += 500) load.tryEnter(1);
    expect(load.overloadedFor(3_000)).toBe(true);
    // Refusals stop: within a second the overload is over.
    now += 1_500;
    expect(load.overloadedFor(3_000)).toBe(false);
    // A new refusal after the pause starts a new window.
    load.tryEnter(1);
    expect(load.overloadedFor(3_000)).toBe(false);
  });
});
