/**
 * The `nodejs_eventloop_lag_{min,max,mean,stddev,p50,p90,p99}_seconds` gauges, as prom-client's
 * default metrics name them, fed from an event-loop delay monitor that samples every
 * EVENT_LOOP_MONITOR_RESOLUTION_MS instead of prom-client's 10 ms.
 *
 * Why: the monitor is a libuv timer that fires whether or not anything runs. At 10 ms it woke an
 * idle sidecar 100 times a second (0.3–0.7 % of a core doing nothing); at 100 ms, 11
 * (bench/PROFILE.md, "An idle sidecar's 100 wakeups a second"). Node records the time between
 * two of the timer's ticks, interval included, and prom-client reports that as it is (its
 * idle p50 reads 0.0101 s); here the interval is taken off, so each gauge is the delay itself,
 * and a coarser interval does not raise them. A stall of 100 ms or more always shows; a shorter
 * one in proportion to its length.
 */
import { type IntervalHistogram, monitorEventLoopDelay } from "node:perf_hooks";
import { Gauge, type Registry } from "prom-client";

export const EVENT_LOOP_MONITOR_RESOLUTION_MS = 100;

const NS_PER_SECOND = 1e9;

const INTERVAL_NS = EVENT_LOOP_MONITOR_RESOLUTION_MS * 1e6;

type Reading = (histogram: IntervalHistogram) => number;

/** Above the interval, in seconds; a recorded tick is never shorter than it, bar rounding. */
const delay = (ns: number) => Math.max(0, ns - INTERVAL_NS) / NS_PER_SECOND;

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
  const histogram = monitorEventLoopDelay({ resolution: EVENT_LOOP_MONITOR_RESOLUTION_MS });
  histogram.enable();
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
