/**
 * The recorded spans of a proxied request (its SERVER span and each attempt's CLIENT span),
 * made here rather than by the SDK's tracer: a request that is traced pays for one object per
 * span, its attribute map and two timestamps — no attribute sanitizing (ours are strings and
 * numbers by construction), no span-count metrics, no context maps, no link or event arrays.
 * What ends here goes to the same span processor as the SDK's spans (batching, queue watch,
 * OTLP export), as the `ReadableSpan` the exporters read. The token spans, rare, stay the SDK's.
 */
import {
  type Attributes,
  type AttributeValue,
  type HrTime,
  type Link,
  type SpanContext,
  type SpanKind,
  type SpanStatus,
  SpanStatusCode,
} from "@opentelemetry/api";
import type { InstrumentationScope } from "@opentelemetry/core";
import type { Resource } from "@opentelemetry/resources";
import type { ReadableSpan, SpanProcessor, TimedEvent } from "@opentelemetry/sdk-trace-base";
import { ATTR_ERROR_TYPE } from "@opentelemetry/semantic-conventions";

/** Where a recorded span belongs and goes: the provider's resource, scope and processor. */
export interface SpanSink {
  readonly resource: Resource;
  readonly scope: InstrumentationScope;
  readonly processor: SpanProcessor;
}

const NO_LINKS: Link[] = [];
const NO_EVENTS: TimedEvent[] = [];
const UNSET: SpanStatus = Object.freeze({ code: SpanStatusCode.UNSET });
const ERROR: SpanStatus = Object.freeze({ code: SpanStatusCode.ERROR });
const NOT_ENDED: HrTime = [0, 0];

/** Now, as OTLP wants it: [seconds, nanoseconds] since the epoch, sub-millisecond. */
function now(): HrTime {
  const epochMs = performance.timeOrigin + performance.now();
  const seconds = Math.trunc(epochMs / 1000);
  const nanos = Math.round((epochMs - seconds * 1000) * 1e6);
  return nanos < 1e9 ? [seconds, nanos] : [seconds + 1, nanos - 1e9];
}

export class RecordedSpan implements ReadableSpan {
  readonly startTime: HrTime = now();
  endTime: HrTime = NOT_ENDED;
  status: SpanStatus = UNSET;
  ended = false;
  readonly links = NO_LINKS;
  readonly events = NO_EVENTS;
  readonly droppedAttributesCount = 0;
  readonly droppedEventsCount = 0;
  readonly droppedLinksCount = 0;

  constructor(
    private readonly sink: SpanSink,
    readonly name: string,
    readonly kind: SpanKind,
    private readonly context: SpanContext,
    readonly parentSpanContext: SpanContext | undefined,
    readonly attributes: Attributes,
  ) {}

  spanContext(): SpanContext {
    return this.context;
  }

  get resource(): Resource {
    return this.sink.resource;
  }

  get instrumentationScope(): InstrumentationScope {
    return this.sink.scope;
  }

  get duration(): HrTime {
    const [seconds, nanos] = this.endTime;
    const [startSeconds, startNanos] = this.startTime;
    const total = (seconds - startSeconds) * 1e9 + (nanos - startNanos);
    return [Math.trunc(total / 1e9), total % 1e9];
  }

  /** Ignored once the span ended, as the SDK's spans do. */
  setAttribute(key: string, value: AttributeValue): void {
    if (!this.ended) this.attributes[key] = value;
  }

  /** Failed: `error.type` and status ERROR (OpenTelemetry's HTTP semantic conventions). */
  fail(errorType: string): void {
    if (this.ended) return;
    this.attributes[ATTR_ERROR_TYPE] = errorType;
    this.status = ERROR;
  }

  /** Ends the span, once, and hands it to the processor (which exports it if sampled). */
  end(): void {
    if (this.ended) return;
    this.endTime = now();
    this.ended = true;
    this.sink.processor.onEnd(this);
  }
}
