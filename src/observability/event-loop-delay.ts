/**
 * The `nodejs_eventloop_lag_{min,max,mean,stddev,p50,p90,p99}_seconds` gauges, as prom-client's
 * default metrics name them, fed from a timer that ticks every EVENT_LOOP_MONITOR_RESOLUTION_MS
 * instead of prom-client's 10 ms monitor.
 *
 * Why: the monitor is a timer that fires whether or not anything runs. At 10 ms it woke an idle
 * sidecar 100 times a second (0.3–0.7 % of a core doing nothing); at 100 ms, 11
 * (bench/PROFILE.md, "An idle sidecar's 100 wakeups a second"). Each tick records how late it
 * ran, so a gauge is the delay itself. (Node's `monitorEventLoopDelay` records the time between
 * two ticks, interval included, which prom-client reports as the delay — its idle p50 reads
 * 0.0101 s — and its `reset()` also forgets the last tick, so a stall right after a scrape went
 * unrecorded.) A stall of S ms reads between S − 100 and S; one shorter than 100 ms shows in
 * proportion to its length.
 */
import { createHistogram, type RecordableHistogram } from "node:perf_hooks";
import { Gauge, type Registry } from "prom-client";

const EVENT_LOOP_MONITOR_RESOLUTION_MS = 100;

const NS_PER_SECOND = 1e9;

type Reading = (histogram: RecordableHistogram) => number;

/** A recorded lateness, in seconds (1 ns is what an on-time tick records). */
const delay = (ns: number) => (ns <= 1 ? 0 : ns / NS_PER_SECOND);

/** prom-client's names and help texts, so dashboards built on them keep working. */
const GAUGES: ReadonlyArray<readonly [name: string, help: string, read: Reading]> = [
  [
    "nodejs_eventloop_lag_min_seconds",
    "The minimum recorded event loop delay.",
    (h) => delay(h.min),
  ],
  [
    "nodejs_eventloop_lag_max_seconds",
    "The maximum recorded event loop delay.",
    (h) => delay(h.max),
  ],
  [
    "nodejs_eventloop_lag_mean_seconds",
    "The mean of the recorded event loop delays.",
    (h) => delay(h.mean),
  ],
  [
    "nodejs_eventloop_lag_stddev_seconds",
    "The standard deviation of the recorded event loop delays.",
    (h) => h.stddev / NS_PER_SECOND,
  ],
  [
    "nodejs_eventloop_lag_p50_seconds",
    "The 50th percentile of the recorded event loop delays.",
    (h) => delay(h.percentile(50)),
  ],
  [
    "nodejs_eventloop_lag_p90_seconds",
    "The 90th percentile of the recorded event loop delays.",
    (h) => delay(h.percentile(90)),
  ],
  [
    "nodejs_eventloop_lag_p99_seconds",
    "The 99th percentile of the recorded event loop delays.",
    (h) => delay(h.percentile(99)),
  ],
];

/**
 * Registers the gauges on `registry`. One scrape reads every gauge from the same samples, then
 * starts the next period (as prom-client does): the first gauge a scrape collects takes the
 * reading, and the rest of that scrape (the same turn of the event loop) reuses it.
 */
export function registerEventLoopDelay(registry: Registry): void {
  const histogram = createHistogram();
  let lastTickMs = performance.now();
  const tick = () => {
    const nowMs = performance.now();
    const lateMs = nowMs - lastTickMs - EVENT_LOOP_MONITOR_RESOLUTION_MS;
    // A histogram records integers ≥ 1: on time is 1 ns.
    histogram.record(Math.max(1, Math.round(lateMs * 1e6)));
    lastTickMs = nowMs;
  };
  setInterval(tick, EVENT_LOOP_MONITOR_RESOLUTION_MS).unref();
  let reading: number[] | undefined;
  const read = (index: number): number => {
    if (reading === undefined) {
      reading =
        histogram.count === 0
          ? GAUGES.map(() => 0)
          : GAUGES.map(([, , readOne]) => readOne(histogram));
      histogram.reset();
      setImmediate(() => {
        reading = undefined;
      });
    }
    return reading[index] ?? 0;
  };
  GAUGES.forEach(([name, help], index) => {
    registry.removeSingleMetric(name);
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        this.set(read(index));
      },
    });
  });
}
