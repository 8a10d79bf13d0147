/**
 * The event-loop delay gauges (src/observability/event-loop-delay.ts): prom-client's names, once
 * each, fed from a 100 ms tick that records how late it ran — an idle loop reads ~0, not the
 * 0.1 s between two ticks, and a blocked loop reads the block, also right after a scrape.
 */
import { describe, expect, it } from "vitest";
import { createMetrics } from "../../src/observability/metrics.js";
import { blockLoop, sleep } from "../helpers/wait.js";

const DELAY_GAUGES = ["min", "max", "mean", "stddev", "p50", "p90", "p99"].map(
  (stat) => `nodejs_eventloop_lag_${stat}_seconds`,
);

function gaugeValue(text: string, name: string): number {
  const match = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
  if (!match) throw new Error(`no ${name} in /metrics`);
  return Number(match[1]);
}

describe("event-loop delay gauges", () => {
  it("keeps prom-client's names, each once, and the scrape-time lag gauge", async () => {
    const text = await createMetrics().registry.metrics();
    for (const name of [...DELAY_GAUGES, "nodejs_eventloop_lag_seconds"]) {
      expect(text.match(new RegExp(`^# TYPE ${name} gauge$`, "gm"))).toHaveLength(1);
    }
  });

  it("reads how late each tick ran: ~0 idle, a block when blocked, even right after a scrape", async () => {
    const { registry } = createMetrics();
    await sleep(450);
    const idle = await registry.metrics();
    // The time between two ticks (the interval left in) would put ≥ 0.1 s in every sample, the
    // least one included; here only a tick that ran 90 ms late reads that much, and it takes
    // every one of the ~4 to be that late for the least to.
    expect(gaugeValue(idle, "nodejs_eventloop_lag_min_seconds")).toBeLessThan(0.09);

    // Straight after a scrape: Node's monitorEventLoopDelay forgot its last tick on reset and
    // recorded nothing for the next one.
    blockLoop(1_000);
    await sleep(150);
    const blocked = await registry.metrics();
    // The tick due during the block ran at its end: at least 1000 − 100 ms late.
    expect(gaugeValue(blocked, "nodejs_eventloop_lag_max_seconds")).toBeGreaterThanOrEqual(0.9);
    // Each scrape starts a new period: the block is not in the next one (only a stall of 0.9 s
    // in these 350 ms, or the block kept over, reads that much).
    await sleep(350);
    const after = await registry.metrics();
    expect(gaugeValue(after, "nodejs_eventloop_lag_max_seconds")).toBeLessThan(0.9);
  });
});
