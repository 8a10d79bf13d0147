/**
 * A prom-client Histogram for the per-request path: a series (one set of label values) is
 * resolved once and then observed with a few number updates, where prom-client's `observe` makes
 * a closure, checks the labels and builds their hash string on every call (0.3 µs of a small
 * GET's ~35, even when batched). Everything prom-client reads is unchanged: the registry gets
 * the same values from `get()` and `getForPromString()` (same names, labels, order, cumulative
 * buckets, `+Inf`, `_sum`, `_count`), and `collect` still runs first. Exemplars are not
 * supported (bearer-proxy uses none).
 */
import {
  type CollectFunction,
  Histogram,
  type HistogramConfiguration,
  type LabelValues,
  type MetricObjectWithValues,
  type MetricValueWithName,
  type ObserveDataWithExemplar,
} from "prom-client";

/** One series' counts, observed without label work. */
export class HistogramSeries {
  /** Observations at or under each bound (not cumulative; the last slot is over every bound). */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  /**
   * Exported. False after `reset` or `remove` until the next observation (or `zero`), as
   * prom-client's series are gone until observed again; the object stays, so a caller that
   * keeps it (request-metrics.ts) is never cut off.
   */
  shown = true;

  constructor(
    readonly labels: Readonly<Record<string, string | number>>,
    private readonly bounds: readonly number[],
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
    const { bounds } = this;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
    this.shown = true;
  }

  /** Back to no observations; `shown` says whether it is exported meanwhile. */
  clear(shown: boolean): void {
    this.counts.fill(0);
    this.sum = 0;
    this.count = 0;
    this.shown = shown;
  }
}

type Described<T extends string> = MetricObjectWithValues<MetricValueWithName<T>>;

export class SeriesHistogram<T extends string = string> extends Histogram<T> {
  private readonly bounds: readonly number[];
  private readonly labelNamesInOrder: readonly string[];
  private readonly byKey = new Map<string, HistogramSeries>();
  private readonly metricName: string;
  private readonly metricHelp: string;

  constructor(config: HistogramConfiguration<T> & { buckets: number[] }) {
    super(config);
    // prom-client's constructor sets `observe` on the instance, which would hide this class's.
    delete (this as { observe?: unknown }).observe;
    this.bounds = [...config.buckets].sort((a, b) => a - b);
    this.labelNamesInOrder = [...(config.labelNames ?? [])];
    this.metricName = config.name;
    this.metricHelp = config.help;
    // Without labels prom-client shows its one series (at zero) from the start.
    if (this.labelNamesInOrder.length === 0) this.series({} as LabelValues<T>);
  }

  /** The series for `labels`, made on first use; keep it and observe it directly. */
  series(labels: LabelValues<T>): HistogramSeries {
    const values = labels as Record<string, string | number | undefined>;
    // JSON of the values in label-name order: distinct label sets never share a key (an absent
    // label is null, "" a string).
    const key = JSON.stringify(this.labelNamesInOrder.map((name) => values[name] ?? null));
    let series = this.byKey.get(key);
    if (series === undefined) {
      const own: Record<string, string | number> = {};
      for (const name of this.labelNamesInOrder)
        if (values[name] !== undefined) own[name] = values[name]!;
      series = new HistogramSeries(own, this.bounds);
      this.byKey.set(key, series);
    }
    return series;
  }

  /** prom-client's `observe(value)` and `observe(labels, value)`, through the series. */
  override observe(
    labelsOrValue: LabelValues<T> | number | ObserveDataWithExemplar<T>,
    value?: number,
  ): void {
    if (typeof labelsOrValue === "number") {
      this.series({} as LabelValues<T>).observe(labelsOrValue);
      return;
    }
    if (value === undefined) throw new Error(`${this.metricName}: exemplars are not supported`);
    this.series(labelsOrValue as LabelValues<T>).observe(value);
  }

  /** prom-client's `labels()`, by values in label-name order or by object, on the series. */
  override labels(...args: [LabelValues<T>] | string[]): Histogram.Internal<T> {
    const labels = this.labelsFrom(args);
    // Made on the first observation: prom-client shows no series for labels never observed.
    let series: HistogramSeries | undefined;
    const bound = () => (series ??= this.series(labels));
    return {
      observe: (value) => bound().observe(value),
      startTimer: () => {
        const startMs = performance.now();
        // As prom-client's: labels given at the end are added to (or override) the bound ones.
        return (endLabels?: LabelValues<T>) => {
          const seconds = (performance.now() - startMs) / 1000;
          const target =
            endLabels === undefined ? bound() : this.series({ ...labels, ...endLabels });
          target.observe(seconds);
          return seconds;
        };
      },
    };
  }

  /** Hidden and at zero until observed again (the object stays: label sets are bounded). */
  override remove(...args: [LabelValues<T>] | string[]): void {
    this.series(this.labelsFrom(args)).clear(false);
  }

  private labelsFrom(args: [LabelValues<T>] | string[]): LabelValues<T> {
    if (args.length === 1 && typeof args[0] === "object") return args[0];
    const labels: Record<string, string> = {};
    this.labelNamesInOrder.forEach((name, i) => {
      if (args[i] !== undefined) labels[name] = args[i] as string;
    });
    return labels as LabelValues<T>;
  }

  override reset(): void {
    super.reset();
    // prom-client's constructor calls reset() before this class's fields exist.
    if (this.byKey === undefined) return;
    // Without labels prom-client shows its one series (at zero) after a reset too.
    const unlabelled = this.labelNamesInOrder.length === 0;
    for (const series of this.byKey.values()) series.clear(unlabelled);
  }

  override zero(labels: LabelValues<T>): void {
    this.series(labels).clear(true);
  }

  override async get(): Promise<Described<T>> {
    await this.runCollect();
    const values: MetricValueWithName<T>[] = [];
    this.eachValue((labels, shared, value, metricName, exemplar) => {
      const entry = { labels: { ...labels, ...shared } as LabelValues<T>, value, metricName };
      // prom-client's own buckets carry `exemplar: null` (not in its types).
      values.push(exemplar === null ? ({ ...entry, exemplar } as typeof entry) : entry);
    });
    return this.described(values);
  }

  /**
   * What the registry formats /metrics from (it prefers this to `get`): the series' labels as
   * `sharedLabels`, after `le`, as prom-client's own histogram gives them.
   */
  async getForPromString(): Promise<Described<T>> {
    await this.runCollect();
    const values: MetricValueWithName<T>[] = [];
    this.eachValue((labels, sharedLabels, value, metricName, exemplar) => {
      // `sharedLabels` is what prom-client's own histogram hands its registry (not in its types).
      const entry = { labels, sharedLabels, value, metricName, exemplar };
      values.push(entry as unknown as MetricValueWithName<T>);
    });
    return this.described(values);
  }

  private described(values: MetricValueWithName<T>[]): Described<T> {
    return {
      name: this.metricName,
      help: this.metricHelp,
      // The runtime value prom-client's Histogram has (its types declare an enum).
      type: "histogram" as unknown as Described<T>["type"],
      values,
      aggregator: "sum",
    } as Described<T>; // prom-client's own get() has no `collect` either, whatever its types say
  }

  /** prom-client runs a metric's `collect` before every read: so does this one. */
  private async runCollect(): Promise<void> {
    const { collect } = this as { collect?: CollectFunction<Histogram<T>> };
    if (collect) await collect.call(this);
  }

  /** Every exported value in prom-client's order: buckets (cumulative), +Inf, sum, count. */
  private eachValue(
    emit: (
      labels: Record<string, string | number>,
      shared: Readonly<Record<string, string | number>>,
      value: number,
      metricName: string,
      /** null on buckets (no exemplar), as prom-client's; absent on sum and count. */
      exemplar: null | undefined,
    ) => void,
  ): void {
    const bucket = `${this.metricName}_bucket`;
    for (const series of this.byKey.values()) {
      if (!series.shown) continue;
      let cumulative = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        cumulative += series.counts[i]!;
        emit({ le: this.bounds[i]! }, series.labels, cumulative, bucket, null);
      }
      emit({ le: "+Inf" }, series.labels, series.count, bucket, null);
      emit({}, series.labels, series.sum, `${this.metricName}_sum`, undefined);
      emit({}, series.labels, series.count, `${this.metricName}_count`, undefined);
    }
  }
}
