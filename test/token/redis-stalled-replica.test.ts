/**
 * A replica whose own event loop stalls (a CPU-throttled pod, a start compiling its code, a
 * long GC) while a Redis reply is on its way must read the reply, not call Redis down and fetch
 * its own token: CI's try-it block saw both replicas of a gateway ask the token endpoint when
 * one of them started under load. A Redis that really does not answer still times out.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  connectRedis,
  type RedisConnection,
  RedisUnavailableError,
} from "../../src/base/redis-connection.js";
import { createRedisTokenCache } from "../../src/token/redis-token-cache.js";
import {
  issueSharedToken,
  recordingLogger,
  redisCacheConfig,
  skipWithoutRedis,
  useCacheCleanup,
  useRedisServer,
} from "../helpers/redis-server.js";
import { blockLoop } from "../helpers/wait.js";

const COMMAND_TIMEOUT_MS = 200;
/** Three command timeouts: a plain timer would have fired during it. */
const STALL_MS = 3 * COMMAND_TIMEOUT_MS;

/** Lets the command just issued reach the socket before the stall begins. */
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe.skipIf(skipWithoutRedis)("a replica whose own loop stalls", () => {
  const server = useRedisServer();
  const caches = useCacheCleanup();
  const connections: RedisConnection[] = [];
  afterEach(async () => {
    server().resume();
    await Promise.all(connections.splice(0).map((connection) => connection.close()));
  });

  async function openConnection(): Promise<{ connection: RedisConnection; downs: unknown[] }> {
    const downs: unknown[] = [];
    const connection = connectRedis({
      target: { url: server().url },
      commandTimeoutMs: COMMAND_TIMEOUT_MS,
      onStateChange: (next, _previous, reason) => {
        if (next === "down") downs.push(reason);
      },
    });
    connections.push(connection);
    await connection.run((redis) => redis.get("warm-up"));
    return { connection, downs };
  }

  it("reads the reply that came during the stall and keeps Redis up", async () => {
    const { connection, downs } = await openConnection();
    const reply = connection.run((redis) => redis.get("absent"));
    await nextTurn();
    blockLoop(STALL_MS);
    await expect(reply).resolves.toBeNull();
    expect(connection.state()).toBe("up");
    expect(downs).toEqual([]);
  });

  it("reads the reply to a command the stall kept from being written", async () => {
    const { connection, downs } = await openConnection();
    // node-redis writes from a setImmediate: this stall comes before the write, so the reply
    // can only come after it, and needs a whole wait of its own.
    const reply = connection.run((redis) => redis.get("absent"));
    blockLoop(STALL_MS);
    await expect(reply).resolves.toBeNull();
    expect(downs).toEqual([]);
  });

  it("still times out on a Redis that does not answer, stall or not", async () => {
    const { connection } = await openConnection();
    server().pause();
    const started = performance.now();
    const reply = connection.run((redis) => redis.get("absent"));
    await nextTurn();
    blockLoop(STALL_MS);
    await expect(reply).rejects.toBeInstanceOf(RedisUnavailableError);
    // At most the stall and two timeouts (the re-armed one), with room for a loaded machine.
    expect(performance.now() - started).toBeLessThan(STALL_MS + 2 * COMMAND_TIMEOUT_MS + 2_000);
    expect(connection.state()).toBe("down");
  });

  it("takes the token another replica stored, not the token endpoint's", async () => {
    const config = redisCacheConfig(server().url, { commandTimeoutMs: COMMAND_TIMEOUT_MS });
    const first = createRedisTokenCache({ config, logger: recordingLogger().logger });
    const second = createRedisTokenCache({ config, logger: recordingLogger().logger });
    caches.push(first, second);
    const args = { credentialKey: "stalled-replica", secret: "s3cret", refreshFraction: 0.75 };
    await first.getOrFetch({ ...args, fetchFromIdp: async () => issueSharedToken("tok-first") });
    let asked = 0;
    const fetchFromIdp = async () => {
      asked++;
      return issueSharedToken("tok-second");
    };
    // The second replica's connection is up before its own first request, as after a start.
    await second.getOrFetch({ ...args, credentialKey: "warm-up", fetchFromIdp });
    asked = 0;
    const taken = second.getOrFetch({ ...args, fetchFromIdp });
    await nextTurn();
    blockLoop(STALL_MS);
    expect((await taken).accessToken).toBe("tok-first");
    expect(asked).toBe(0);
  });
});
