/** The real clock's timers: unref'd, and safe with delays Node.js cannot hold. */
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../src/base/clock.js";

describe("systemClock", () => {
  it("waits (rather than firing at once) for a delay above the longest Node.js timer", async () => {
    let fired = false;
    const handle = systemClock.setTimeout(() => {
      fired = true;
    }, 2 ** 32);
    await sleep(30);
    systemClock.clearTimeout(handle);
    expect(fired).toBe(false);
  });

  it("fires short timers", async () => {
    let fired = false;
    systemClock.setTimeout(() => {
      fired = true;
    }, 1);
    await sleep(30);
    expect(fired).toBe(true);
  });
});
