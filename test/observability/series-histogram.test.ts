/**
 * The request histogram's series (observability/series-histogram.ts) expose exactly what
 * prom-client's own Histogram would for the same observations: the /metrics text and the JSON
 * values are compared line for line with a prom-client Histogram fed the same values.
 */
import { Histogram, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { SeriesHistogram } from "../../src/observability/series-histogram.js";

const config = {
  name: "demo_duration_seconds",
  help: "Demo.",
  labelNames: ["upstream", "method", "status_class"] as const,
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
};

/** Values on, between and beyond the bounds, and a zero. */
const OBSERVED = [0, 0.001, 0.0010001, 0.003, 0.05, 0.2, 0.5, 0.7, 29.9, 30, 31, 1000];
const LABELS = [
  { upstream: "a", method: "GET", status_class: "2xx" },
  { upstream: "a", method: "POST", status_class: "5xx" },
  { upstream: 'b "quoted"\\ \n', method: "GET", status_class: "2xx" },
];

function both() {
  const mine = new Registry();
  const theirs = new Registry();
  const series = new SeriesHistogram({
    ...config,
    labelNames: [...config.labelNames],
    registers: [mine],
  });
  const reference = new Histogram({
    ...config,
    labelNames: [...config.labelNames],
    registers: [theirs],
  });
  return { mine, theirs, series, reference };
}

describe("SeriesHistogram", () => {
  it("gives /metrics the text prom-client's Histogram gives for the same observations", async () => {
    const { mine, theirs, series, reference } = both();
    for (const [i, labels] of LABELS.entries()) {
      const s = series.series(labels);
      for (const value of OBSERVED.slice(i)) {
        s.observe(value);
        reference.observe(labels, value);
      }
    }
    const text = await mine.metrics();
    expect(text).toBe(await theirs.metrics());
    expect(text).toContain(
      'demo_duration_seconds_bucket{le="0.001",upstream="a",method="GET",status_class="2xx"} 2',
    );
    // Both formats of the registry, and the JSON.
    mine.setContentType(Registry.OPENMETRICS_CONTENT_TYPE as never);
    theirs.setContentType(Registry.OPENMETRICS_CONTENT_TYPE as never);
    expect(await mine.metrics()).toBe(await theirs.metrics());
    expect(await mine.getMetricsAsJSON()).toEqual(await theirs.getMetricsAsJSON());
  });

  it("observe(labels, value), observe(value), zero, reset and collect behave as prom-client's", async () => {
    const { mine, theirs, series, reference } = both();
    let collected = 0;
    const collect = function (this: Histogram<string>) {
      collected++;
      this.observe(LABELS[1]!, 0.02);
    };
    (series as unknown as { collect: typeof collect }).collect = collect;
    (reference as unknown as { collect: typeof collect }).collect = collect;
    series.observe(LABELS[0]!, 0.3);
    reference.observe(LABELS[0]!, 0.3);
    series.zero(LABELS[2]!);
    reference.zero(LABELS[2]!);
    expect(await mine.metrics()).toBe(await theirs.metrics());
    expect(collected).toBe(2);
    series.labels("a", "GET", "2xx").observe(0.007);
    reference.labels("a", "GET", "2xx").observe(0.007);
    series.labels(LABELS[1]!).observe(4);
    reference.labels(LABELS[1]!).observe(4);
    expect(await mine.metrics()).toBe(await theirs.metrics());
    series.remove(LABELS[1]!);
    reference.remove(LABELS[1]!);
    expect(await mine.metrics()).toBe(await theirs.metrics());
    series.reset();
    reference.reset();
    expect(await mine.metrics()).toBe(await theirs.metrics());
    const [mineBare, theirsBare] = [new Registry(), new Registry()];
    const bare = { ...config, labelNames: [] as string[] };
    const s = new SeriesHistogram({ ...bare, registers: [mineBare] });
    const r = new Histogram({ ...bare, registers: [theirsBare] });
    s.observe(0.004);
    r.observe(0.004);
    expect(await mineBare.metrics()).toBe(await theirsBare.metrics());
  });

  it("a series kept by its caller is exported again once observed after reset or remove", async () => {
    const { mine, theirs, series, reference } = both();
    const kept = series.series(LABELS[0]!);
    kept.observe(0.2);
    reference.observe(LABELS[0]!, 0.2);
    series.reset();
    reference.reset();
    expect(await mine.metrics()).toBe(await theirs.metrics());
    kept.observe(0.04);
    reference.observe(LABELS[0]!, 0.04);
    expect(await mine.metrics()).toBe(await theirs.metrics());
    series.remove(LABELS[0]!);
    reference.remove(LABELS[0]!);
    expect(await mine.metrics()).toBe(await theirs.metrics());
    kept.observe(3);
    reference.observe(LABELS[0]!, 3);
    expect(await mine.metrics()).toBe(await theirs.metrics());
    expect(() => kept.observe(Number.NaN)).toThrow(TypeError);
  });

  it("keeps an absent label and an empty one apart, and shows an unlabelled histogram at zero", async () => {
    const { mine, theirs, series, reference } = both();
    series.observe({ upstream: "", method: "GET" }, 1);
    reference.observe({ upstream: "", method: "GET" }, 1);
    series.observe({ method: "GET" }, 2);
    reference.observe({ method: "GET" }, 2);
    expect(await mine.metrics()).toBe(await theirs.metrics());
    const [mineBare, theirsBare] = [new Registry(), new Registry()];
    const bare = { ...config, labelNames: [] as string[] };
    new SeriesHistogram({ ...bare, registers: [mineBare] });
    new Histogram({ ...bare, registers: [theirsBare] });
    expect(await mineBare.metrics()).toBe(await theirsBare.metrics());
  });

  it("labels().startTimer() takes labels at the end, as prom-client's does", async () => {
    const { mine, theirs, series, reference } = both();
    for (const histogram of [series, reference] as Histogram<string>[]) {
      const bound = histogram.labels({ upstream: "a", method: "GET" });
      expect(bound.startTimer()({ status_class: "5xx" })).toBeGreaterThanOrEqual(0);
      bound.startTimer()({ method: "POST", status_class: "2xx" });
      histogram.labels("a", "GET", "2xx").startTimer()();
    }
    const counts = (text: string) => text.split("\n").filter((line) => line.includes("_count"));
    const mineCounts = counts(await mine.metrics());
    expect(mineCounts).toEqual(counts(await theirs.metrics()));
    expect(mineCounts).toHaveLength(3);
  });
});
