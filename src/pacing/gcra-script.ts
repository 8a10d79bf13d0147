/**
 * gcra.ts's rules as Redis Lua scripts, for the pacer shared by all replicas (shared-pacer.ts).
 *
 * RESERVE books the next turn of a key and says how long to wait for it, or refuses without
 * booking when the turn is further away than the caller may wait: turns are handed out in the
 * order requests reach Redis, so waiting is FIFO across replicas and needs no polling. The time
 * is Redis's own (`TIME`): replicas' clocks never meet. Values are integer microseconds, kept as
 * decimal strings (Lua numbers are doubles: exact to 2^53 µs, and `%.0f` prints them whole).
 *
 * Keys: `<prefix>{<hash>}` holds the TAT, `<prefix>{<hash>}:log` the departure log (burst > 0
 * only). The braces make them one Redis Cluster hash slot, so a script touches one node on a
 * single node, behind Sentinel and in a cluster alike. Both expire once the key is idle.
 *
 * REFUND gives a booked turn back when its request went away before using it (client gone, a
 * pause), if no later turn was booked since; otherwise the turn is simply lost, which is safe.
 */
import { createHash } from "node:crypto";
import type { PaceParams } from "./gcra.js";

export interface LuaScript {
  readonly text: string;
  readonly sha1: string;
}

function script(text: string): LuaScript {
  return { text, sha1: createHash("sha1").update(text).digest("hex") };
}

export const RESERVE = script(`
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local window = tonumber(ARGV[4])
local max_wait = tonumber(ARGV[5])
local burst = tonumber(ARGV[6])
local log = KEYS[2]
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local start = tat - tolerance
if start < now then start = now end
local logged = 0
if log then
  while true do
    local oldest = redis.call('LINDEX', log, 0)
    if not oldest or tonumber(oldest) > now - window then break end
    redis.call('LPOP', log)
  end
  logged = redis.call('LLEN', log)
  if logged >= limit then
    local cap = tonumber(redis.call('LINDEX', log, -limit)) + window
    if cap > start then start = cap end
  end
end
local wait = start - now
if wait > max_wait then return {0, string.format('%.0f', wait)} end
local new_tat = math.max(tat, start) + interval
local ttl_ms = math.ceil((math.max(new_tat, start + window) - now) / 1000) + 1000
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', ttl_ms)
local remaining = 0
if new_tat - start <= tolerance then
  remaining = math.min(burst + 1, math.floor((tolerance - (new_tat - start)) / interval) + 1)
end
if log then
  redis.call('RPUSH', log, string.format('%.0f', start))
  redis.call('LTRIM', log, -limit, -1)
  redis.call('PEXPIRE', log, ttl_ms)
  remaining = math.min(remaining, limit - math.min(logged + 1, limit))
end
return {1, string.format('%.0f', wait), remaining, string.format('%.0f', new_tat - start),
  string.format('%.0f', new_tat), string.format('%.0f', start)}
`);

export const REFUND = script(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then
  redis.call('SET', KEYS[1], string.format('%.0f', tonumber(ARGV[1]) - tonumber(ARGV[3])), 'PX', ttl)
end
if KEYS[2] and redis.call('LINDEX', KEYS[2], -1) == ARGV[2] then redis.call('RPOP', KEYS[2]) end
return 1
`);

/** The script's view of the rate, in whole microseconds (rounded up: spacing never shrinks). */
export interface ScriptRate {
  intervalUs: number;
  toleranceUs: number;
  limit: number;
  windowUs: number;
  burst: number;
  keepsLog: boolean;
}

export function scriptRate(params: PaceParams): ScriptRate {
  const intervalUs = Math.ceil(params.intervalMs * 1000);
  return {
    intervalUs,
    toleranceUs: intervalUs * params.burst,
    limit: params.limit,
    windowUs: Math.ceil(params.windowMs * 1000),
    burst: params.burst,
    keepsLog: params.keepsLog,
  };
}

/** The Redis keys of budget `key` (hashed: caller identities stay out of Redis). */
export function scriptKeys(prefix: string, key: string, rate: ScriptRate): string[] {
  const tag = createHash("sha256").update(key).digest("base64url").slice(0, 22);
  const tatKey = `${prefix}{${tag}}`;
  return rate.keepsLog ? [tatKey, `${tatKey}:log`] : [tatKey];
}

export function reserveArguments(rate: ScriptRate, maxWaitMs: number): string[] {
  return [
    String(rate.intervalUs),
    String(rate.toleranceUs),
    String(rate.limit),
    String(rate.windowUs),
    String(Math.max(0, Math.floor(maxWaitMs * 1000))),
    String(rate.burst),
  ];
}

/** RESERVE's answer: a booked turn, or a refusal with the wait it would have needed. */
export type Reservation =
  | {
      granted: true;
      waitMs: number;
      remaining: number;
      fullInMs: number;
      /** The TAT and start written, for REFUND. */
      tat: string;
      start: string;
    }
  | { granted: false; waitMs: number };

export function parseReservation(reply: unknown): Reservation {
  if (!Array.isArray(reply) || reply.length < 2) {
    throw new Error("unexpected reply from the pacing script");
  }
  const waitMs = Number(reply[1]) / 1000;
  if (Number(reply[0]) !== 1) return { granted: false, waitMs };
  return {
    granted: true,
    waitMs,
    remaining: Number(reply[2]),
    fullInMs: Number(reply[3]) / 1000,
    tat: String(reply[4]),
    start: String(reply[5]),
  };
}

export function refundArguments(rate: ScriptRate, booked: { tat: string; start: string }) {
  return [booked.tat, booked.start, String(rate.intervalUs)];
}
