/**
 * The shared pacer's calls to the replicas' Redis: the GCRA scripts of gcra-script.ts by their
 * SHA-1 (sent whole when a restarted or failed-over Redis has forgotten them), each call bounded
 * by `commandTimeoutMs` so that a slow Redis makes the replica pace alone instead of waiting.
 */
import type { Clock } from "../base/clock.js";
import { withStallTolerantTimeout } from "../base/stall-tolerant-timeout.js";
import {
  type LuaScript,
  parseReservation,
  REFUND,
  RESERVE,
  type Reservation,
  refundArguments,
  reserveArguments,
  type ScriptRate,
  scriptKeys,
} from "./gcra-script.js";

/** The two commands the pacer sends; node-redis clients, clusters and sentinels all have them. */
export interface PacingRedis {
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  evalSha?(sha1: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
}

/** The GCRA scripts on the replicas' Redis, each call bounded by `commandTimeoutMs`. */
export class PacingScripts {
  constructor(
    private readonly redis: () => PacingRedis | undefined,
    private readonly clock: Clock,
    private readonly keyPrefix: string,
    private readonly rate: ScriptRate,
    private readonly commandTimeoutMs: number,
  ) {}

  /** Books the next turn of `key` if it comes within `maxWaitMs` (RESERVE). */
  reserve(key: string, maxWaitMs: number): Promise<Reservation> {
    const { keyPrefix, rate } = this;
    return this.run(
      RESERVE,
      scriptKeys(keyPrefix, key, rate),
      reserveArguments(rate, maxWaitMs),
    ).then(parseReservation);
  }

  /** Gives a booked turn back (REFUND). */
  refund(key: string, booked: { tat: string; start: string }): Promise<unknown> {
    const { keyPrefix, rate } = this;
    return this.run(REFUND, scriptKeys(keyPrefix, key, rate), refundArguments(rate, booked));
  }

  private run(scriptToRun: LuaScript, keys: string[], args: string[]): Promise<unknown> {
    const client = this.redis();
    if (client === undefined) return Promise.reject(new Error("no Redis connection"));
    const call = async () => {
      if (client.evalSha) {
        try {
          return await client.evalSha(scriptToRun.sha1, { keys, arguments: args });
        } catch (err) {
          // A Redis that restarted or failed over has forgotten the script: send it whole.
          if (!String((err as Error)?.message).startsWith("NOSCRIPT")) throw err;
        }
      }
      return client.eval(scriptToRun.text, { keys, arguments: args });
    };
    const { clock, commandTimeoutMs } = this;
    // A reply that came during a stall of our own loop is read, not timed out: a replica that
    // wrongly paces alone sends more than the shared budget allows.
    return withStallTolerantTimeout(
      call(),
      commandTimeoutMs,
      () => new Error(`Redis did not answer within ${commandTimeoutMs} ms`),
      clock,
    );
  }
}
