/**
 * The whole proxy with tracing on, end to end over real sockets: the product's own config
 * loader and `buildApp`, given a `Tracing` made by `createTracing` and exporting to a real
 * OTLP/HTTP receiver on 127.0.0.1; the upstream and its token endpoint are the built-in
 * emulator over TLS (test PKI). Every log line is kept (access lines included).
 */

import { afterAll, afterEach, beforeAll } from "vitest";
import { type App, buildApp } from "../../src/app/build-app.js";
import { DEMO_CLIENT } from "../../src/emulator/emulator.js";
import type { EchoResponse, Emulator } from "../../src/emulator/index.js";
import { createMetrics } from "../../src/observability/metrics.js";
import {
  createTracing,
  NOOP_TRACING,
  type Tracing,
  type TracingEnv,
} from "../../src/observability/tracing.js";
import type { OtlpProtocol } from "../../src/observability/tracing-settings.js";
import { createCapturingLogger, loadTestConfig } from "../helpers/app-under-test.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import {
  type CollectedSpan,
  type OtlpReceiver,
  startOtlpReceiver,
} from "../helpers/otlp-receiver.js";
import { createTestPki, type TestPki } from "../helpers/tls.js";
import { waitFor } from "../helpers/wait.js";

export interface TracedProxyOptions {
  /** CA the upstreams' certificates chain to. */
  caPem: string;
  /** `upstreams` of the config document (credentials default to the emulator's demo client). */
  upstreams: Record<string, unknown>[];
  /** OTLP encoding. Default http/protobuf. */
  protocol?: OtlpProtocol;
  /** More OTEL_* variables (sampler, …), over the fixture's. */
  env?: TracingEnv;
  /** Leave tracing off (`NOOP_TRACING`, as with no OTEL_* at all). */
  off?: boolean;
}

export interface TracedProxy {
  app: App;
  tracing: Tracing;
  receiver: OtlpReceiver;
  /** `http://127.0.0.1:<port>` of the proxy listener. */
  url: string;
  /** Every log line as written, and parsed. */
  lines: string[];
  records: Record<string, unknown>[];
  /** The access lines (`msg: "request"`). */
  accessLines(): Record<string, unknown>[];
  /** Flushes the tracer and returns every span received so far. */
  flushed(): Promise<CollectedSpan[]>;
  close(): Promise<void>;
}

export async function startTracedProxy(options: TracedProxyOptions): Promise<TracedProxy> {
  const receiver = await startOtlpReceiver();
  const captured = createCapturingLogger("info");
  const tracing = options.off
    ? NOOP_TRACING
    : await createTracing({
        env: {
          OTEL_TRACES_EXPORTER: "otlp",
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
          OTEL_EXPORTER_OTLP_PROTOCOL: options.protocol ?? "http/protobuf",
          // Only forceFlush exports: a timed export in flight is not awaited by forceFlush
          // (the SDK flushes what is still queued), so a test could read the receiver too early.
          OTEL_BSP_SCHEDULE_DELAY: "600000",
          ...options.env,
        },
        logger: captured.logger,
        serviceVersion: "9.9.9-test",
      });
  const loaded = await loadTestConfig({
    caPem: options.caPem,
    config: {
      upstreams: options.upstreams.map((upstream) => ({
        clientId: DEMO_CLIENT.clientId,
        clientSecret: DEMO_CLIENT.clientSecret,
        ...upstream,
      })),
    },
  });
  const app = buildApp(loaded.config, {
    logger: captured.logger,
    metrics: createMetrics({ collectProcessMetrics: false }),
    tracing,
  });
  let port: number;
  try {
    port = (await app.listen()).proxy[0]!.port;
  } catch (error) {
    await app.close(0).catch(() => {});
    await tracing.shutdown();
    await receiver.close();
    loaded.cleanup();
    throw error;
  }
  let closing: Promise<void> | undefined;
  return {
    app,
    tracing,
    receiver,
    url: `http://127.0.0.1:${port}`,
    lines: captured.lines,
    records: captured.records,
    accessLines: () => captured.records.filter((r) => r.msg === "request"),
    async flushed() {
      // A client can read the whole answer before the proxy's 'finish' ends the SERVER span:
      // wait until no request is in flight, then export.
      await waitFor(
        () => app.proxies.every((proxy) => proxy.inFlight() === 0),
        "requests to finish",
      );
      await tracing.forceFlush();
      return receiver.spans;
    },
    close() {
      closing ??= (async () => {
        await app.close(1_000);
        await tracing.shutdown();
        await receiver.close();
        loaded.cleanup();
      })();
      return closing;
    },
  };
}

/** The value of header `name` the upstream received (case-insensitive), all of them. */
export function echoedHeaders(echo: EchoResponse, name: string): string[] {
  const lower = name.toLowerCase();
  return echo.headers.filter(([n]) => n.toLowerCase() === lower).map(([, v]) => v);
}

/** The single value of header `name` the upstream received; fails unless exactly one. */
export function echoedHeader(echo: EchoResponse, name: string): string {
  const values = echoedHeaders(echo, name);
  if (values.length !== 1) {
    throw new Error(`upstream got ${values.length} ${name} fields: ${JSON.stringify(values)}`);
  }
  return values[0]!;
}

export interface TracedProxyBench {
  pki: TestPki;
  /** The TLS emulator (upstream and token endpoint), shared by the describe block. */
  emulator: Emulator;
  /** The proxy a test started; closed after each test. */
  proxy: TracedProxy | undefined;
  /** `startTracedProxy` with the bench's CA. */
  start(options: Omit<TracedProxyOptions, "caPem">): Promise<TracedProxy>;
}

/**
 * One emulator for the describe block (started in `beforeAll`, closed in `afterAll`) and a proxy
 * per test in `bench.proxy`, closed in `afterEach` after `beforeClose` (resetting a fault, …).
 */
export function useTracedProxyBench(
  options: { beforeClose?: (emulator: Emulator) => void } = {},
): TracedProxyBench {
  const bench: TracedProxyBench = {
    pki: undefined as unknown as TestPki,
    emulator: undefined as unknown as Emulator,
    proxy: undefined,
    start: (proxyOptions) => startTracedProxy({ caPem: bench.pki.caPem, ...proxyOptions }),
  };
  beforeAll(async () => {
    bench.pki = await createTestPki();
    bench.emulator = await startTlsEmulator(bench.pki);
  });
  afterAll(() => bench.emulator.close());
  afterEach(async () => {
    options.beforeClose?.(bench.emulator);
    await bench.proxy?.close();
    bench.proxy = undefined;
  });
  return bench;
}
