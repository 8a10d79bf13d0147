/**
 * Traffic and probes for tests that run several proxy processes sharing a Redis: wait until a
 * replica reports Redis up, send a burst of concurrent requests, or keep requests flowing until
 * told to stop while counting every answer.
 */
import { type Dispatcher, request } from "undici";
import { type AppUnderTest, startAppUnderTest } from "./app-under-test.js";

/**
 * `count` proxies built from one config document in this process (each with its own Redis
 * client, token registry and listeners), like replicas of one Deployment.
 */
export function startReplicas(
  count: number,
  config: Record<string, unknown>,
  caPem: string,
): Promise<AppUnderTest[]> {
  return Promise.all(
    Array.from({ length: count }, () =>
      startAppUnderTest({ config, caPem, closeTimeoutMs: 2_000 }),
    ),
  );
}

/** Wall-clock ms of each log record of `replica` whose message contains `text`. */
export function logTimes(replica: AppUnderTest, text: string): number[] {
  return replica.records
    .filter((r) => typeof r.msg === "string" && r.msg.includes(text))
    .map((r) => Date.parse(String(r.time)));
}

/** Polls `/metrics` until `bearer_proxy_redis_up` is 1 (or `timeoutMs` passes). */
export async function waitForRedisUp(adminUrl: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if ((await redisUp(adminUrl)) === 1) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${adminUrl}: never connected to Redis`);
}

/** The replica's `bearer_proxy_redis_up` value. */
export async function redisUp(adminUrl: string): Promise<number> {
  const metrics = await (await request(`${adminUrl}/metrics`)).body.text();
  const match = /^bearer_proxy_redis_up (\d)$/m.exec(metrics);
  return match ? Number(match[1]) : Number.NaN;
}

export interface Target {
  proxyUrl: string;
  /** Host header selecting the upstream, if the config routes by host. */
  host?: string;
}

async function once(target: Target, dispatcher: Dispatcher): Promise<number> {
  try {
    const response = await request(`${target.proxyUrl}/platform/v1/spreadsheets/r`, {
      dispatcher,
      headers: target.host ? { host: target.host } : {},
    });
    await response.body.dump();
    return response.statusCode;
  } catch {
    return 0; // a connection error counts as a failed request
  }
}

/** `count` concurrent requests to `target`; resolves with every status (0: no answer). */
export function burst(target: Target, count: number, dispatcher: Dispatcher): Promise<number[]> {
  return Promise.all(Array.from({ length: count }, () => once(target, dispatcher)));
}

export interface SteadyLoad {
  /** Stops sending and resolves with every status answered so far (0: no answer). */
  stop(): Promise<number[]>;
  /** Requests answered so far. */
  count(): number;
}

/** `concurrency` request loops per target, each sending its next request when one is answered. */
export function steadyLoad(
  targets: readonly Target[],
  concurrency: number,
  dispatcher: Dispatcher,
): SteadyLoad {
  const statuses: number[] = [];
  let running = true;
  const loops = targets.flatMap((target) =>
    Array.from({ length: concurrency }, async () => {
      while (running) statuses.push(await once(target, dispatcher));
    }),
  );
  return {
    async stop() {
      running = false;
      await Promise.all(loops);
      return statuses;
    },
    count: () => statuses.length,
  };
}
