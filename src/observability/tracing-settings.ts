/**
 * Tracing settings from the standard OpenTelemetry variables (SDK environment variables spec,
 * OTLP exporter spec), read from an env object rather than `process.env` so tests and several
 * apps in one process can each have their own. Pure: nothing here loads OpenTelemetry, so the
 * off path decides without it.
 *
 * Invalid values are reported and replaced by their default, as the spec asks of an SDK
 * ("MUST NOT fail"), except that the warning goes to our logger instead of OpenTelemetry's
 * global diag logger.
 */

/** Environment variables, e.g. `process.env`. */
export type TracingEnv = Readonly<Record<string, string | undefined>>;

/** The `tracing` section of the configuration. */
export interface TracingConfig {
  /**
   * `otlp` turns tracing on, as `OTEL_TRACES_EXPORTER=otlp` does; `none` (the default) leaves it
   * off. `OTEL_TRACES_EXPORTER`, when set, wins (env over file, as for every other setting).
   */
  exporter?: "otlp" | "none" | undefined;
}

export type OtlpProtocol = "http/protobuf" | "http/json";

export type SamplerName =
  | "always_on"
  | "always_off"
  | "traceidratio"
  | "parentbased_always_on"
  | "parentbased_always_off"
  | "parentbased_traceidratio";

export interface TracingSettings {
  protocol: OtlpProtocol;
  /** Full URL spans are POSTed to (…/v1/traces). */
  url: string;
  /** Extra request headers for the collector (often an API key: never logged). */
  headers: Record<string, string>;
  timeoutMs: number;
  compression: "gzip" | "none";
  serviceName: string;
  /** `OTEL_RESOURCE_ATTRIBUTES`, without `service.name` (see serviceName). */
  resourceAttributes: Record<string, string>;
  sampler: SamplerName;
  /** For the ratio samplers, in [0, 1]. */
  samplerRatio: number;
  batch: {
    scheduledDelayMs: number;
    exportTimeoutMs: number;
    maxQueueSize: number;
    maxExportBatchSize: number;
  };
}

export const DEFAULT_SERVICE_NAME = "bearer-proxy";
const DEFAULT_TRACES_URL = "http://localhost:4318/v1/traces";
const SAMPLERS: readonly SamplerName[] = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio",
];

/** The spec treats an empty value as unset. */
function read(env: TracingEnv, name: string): string | undefined {
  const value = env[name]?.trim();
  return value === "" ? undefined : value;
}

export interface TracingDecision {
  on: boolean;
  /** Problems to report (unsupported exporters named in OTEL_TRACES_EXPORTER). */
  warnings: string[];
}

/** Whether tracing is on: `OTEL_SDK_DISABLED`, then `OTEL_TRACES_EXPORTER`, then the config. */
export function decideTracing(env: TracingEnv, config: TracingConfig | undefined): TracingDecision {
  const warnings: string[] = [];
  if (read(env, "OTEL_SDK_DISABLED")?.toLowerCase() === "true") return { on: false, warnings };
  const exporters = read(env, "OTEL_TRACES_EXPORTER");
  if (exporters === undefined) return { on: config?.exporter === "otlp", warnings };
  let on = false;
  for (const part of exporters.split(",")) {
    const name = part.trim().toLowerCase();
    if (name === "otlp") on = true;
    else if (name !== "none" && name !== "") {
      warnings.push(`OTEL_TRACES_EXPORTER: exporter "${name}" is not supported (only otlp)`);
    }
  }
  return { on, warnings };
}

/**
 * `key=value,key2=value2` with percent-encoded keys and values: the format of
 * OTEL_EXPORTER_OTLP_HEADERS and OTEL_RESOURCE_ATTRIBUTES (W3C Baggage's octets). Entries
 * that don't parse are skipped with a warning naming the variable, never the value.
 */
export function parseKeyValueList(
  raw: string | undefined,
  variable: string,
  warn: (message: string) => void,
): Record<string, string> {
  const out: Record<string, string> = {};
  if (raw === undefined) return out;
  raw.split(",").forEach((entry, index) => {
    if (entry.trim() === "") return;
    const at = entry.indexOf("=");
    try {
      if (at <= 0) throw new Error("no key");
      const key = decodeURIComponent(entry.slice(0, at).trim());
      if (key === "") throw new Error("no key");
      out[key] = decodeURIComponent(entry.slice(at + 1).trim());
    } catch {
      warn(`${variable}: entry ${index + 1} is not key=value (percent-encoded); skipped`);
    }
  });
  return out;
}

function positiveInteger(
  env: TracingEnv,
  name: string,
  fallback: number,
  warn: (message: string) => void,
  allowZero = false,
): number {
  const raw = read(env, name);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (Number.isInteger(value) && (value > 0 || (allowZero && value === 0))) return value;
  warn(
    `${name}=${JSON.stringify(raw)} is not a ${allowZero ? "non-negative" : "positive"} integer; using ${fallback}`,
  );
  return fallback;
}

/** The traces endpoint: the signal-specific URL as is, else the base URL + `v1/traces`. */
function tracesUrl(env: TracingEnv, warn: (message: string) => void): string {
  const specific = read(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  const base = read(env, "OTEL_EXPORTER_OTLP_ENDPOINT");
  const [name, url] =
    specific !== undefined
      ? ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", specific]
      : base !== undefined
        ? ["OTEL_EXPORTER_OTLP_ENDPOINT", `${base}${base.endsWith("/") ? "" : "/"}v1/traces`]
        : ["", DEFAULT_TRACES_URL];
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    warn(`${name} is not a URL; using ${DEFAULT_TRACES_URL}`);
    return DEFAULT_TRACES_URL;
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    warn(`${name} must be an http or https URL; using ${DEFAULT_TRACES_URL}`);
    return DEFAULT_TRACES_URL;
  }
  return parsed.href;
}

function protocol(env: TracingEnv, warn: (message: string) => void): OtlpProtocol {
  const name = read(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
    ? "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
    : "OTEL_EXPORTER_OTLP_PROTOCOL";
  const raw = read(env, name);
  if (raw === undefined || raw === "http/protobuf") return "http/protobuf";
  if (raw === "http/json") return "http/json";
  warn(
    `${name}=${JSON.stringify(raw)} is not supported (http/protobuf or http/json); using http/protobuf`,
  );
  return "http/protobuf";
}

function sampler(env: TracingEnv, warn: (message: string) => void): [SamplerName, number] {
  const raw = read(env, "OTEL_TRACES_SAMPLER")?.toLowerCase();
  let name: SamplerName = "parentbased_always_on";
  if (raw !== undefined) {
    if ((SAMPLERS as readonly string[]).includes(raw)) name = raw as SamplerName;
    else warn(`OTEL_TRACES_SAMPLER=${JSON.stringify(raw)} is not supported; using ${name}`);
  }
  const rawArg = read(env, "OTEL_TRACES_SAMPLER_ARG");
  let ratio = 1;
  if (rawArg !== undefined && name.endsWith("traceidratio")) {
    const value = Number(rawArg);
    if (Number.isFinite(value) && value >= 0 && value <= 1) ratio = value;
    else warn(`OTEL_TRACES_SAMPLER_ARG=${JSON.stringify(rawArg)} is not in [0, 1]; using 1`);
  }
  return [name, ratio];
}

/** Everything the SDK needs, from `env` alone. */
export function readTracingSettings(
  env: TracingEnv,
  warn: (message: string) => void,
): TracingSettings {
  // Signal-specific headers win per key over the general ones (OTLP exporter spec).
  const headers = {
    ...parseKeyValueList(
      read(env, "OTEL_EXPORTER_OTLP_HEADERS"),
      "OTEL_EXPORTER_OTLP_HEADERS",
      warn,
    ),
    ...parseKeyValueList(
      read(env, "OTEL_EXPORTER_OTLP_TRACES_HEADERS"),
      "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
      warn,
    ),
  };
  const resourceAttributes = parseKeyValueList(
    read(env, "OTEL_RESOURCE_ATTRIBUTES"),
    "OTEL_RESOURCE_ATTRIBUTES",
    warn,
  );
  // OTEL_SERVICE_NAME wins over a service.name in OTEL_RESOURCE_ATTRIBUTES.
  const serviceName =
    read(env, "OTEL_SERVICE_NAME") ?? resourceAttributes["service.name"] ?? DEFAULT_SERVICE_NAME;
  delete resourceAttributes["service.name"];
  const timeoutName = read(env, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
    ? "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"
    : "OTEL_EXPORTER_OTLP_TIMEOUT";
  const compressionName = read(env, "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION")
    ? "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"
    : "OTEL_EXPORTER_OTLP_COMPRESSION";
  const rawCompression = read(env, compressionName);
  let compression: "gzip" | "none" = "none";
  if (rawCompression === "gzip") compression = "gzip";
  else if (rawCompression !== undefined && rawCompression !== "none") {
    warn(`${compressionName}=${JSON.stringify(rawCompression)} is not gzip or none; using none`);
  }
  const [samplerName, samplerRatio] = sampler(env, warn);
  const maxQueueSize = positiveInteger(env, "OTEL_BSP_MAX_QUEUE_SIZE", 2048, warn);
  let maxExportBatchSize = positiveInteger(env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512, warn);
  if (maxExportBatchSize > maxQueueSize) {
    warn("OTEL_BSP_MAX_EXPORT_BATCH_SIZE is over OTEL_BSP_MAX_QUEUE_SIZE; using the queue size");
    maxExportBatchSize = maxQueueSize;
  }
  return {
    protocol: protocol(env, warn),
    url: tracesUrl(env, warn),
    headers,
    timeoutMs: positiveInteger(env, timeoutName, 10_000, warn),
    compression,
    serviceName,
    resourceAttributes,
    sampler: samplerName,
    samplerRatio,
    batch: {
      scheduledDelayMs: positiveInteger(env, "OTEL_BSP_SCHEDULE_DELAY", 5000, warn, true),
      exportTimeoutMs: positiveInteger(env, "OTEL_BSP_EXPORT_TIMEOUT", 30_000, warn),
      maxQueueSize,
      maxExportBatchSize,
    },
  };
}
