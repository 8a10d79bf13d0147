/**
 * The process's lifecycle state, shared by the proxy listener (refuses nothing while draining,
 * but adds `Connection: close`) and admin routes (/readyz fails from the first signal on), the
 * process-wide request load every listener counts into (/readyz fails on sustained overload;
 * see base/process-load.ts), and the requests waiting for a pacing turn, which are not in it.
 */
import { createProcessLoad, type ProcessLoad } from "./base/process-load.js";
import { createWaitingRoom, type WaitingRoom } from "./base/waiting-room.js";

export type LifecyclePhase = "starting" | "running" | "draining" | "stopped";

export interface Lifecycle {
  readonly phase: LifecyclePhase;
  /** True once every eagerly fetched upstream had a token at least once (for /startup). */
  readonly started: boolean;
  /** Requests in flight over every proxy listener, and refusals over `limits.maxInFlight`. */
  readonly load: ProcessLoad;
  /** Upgraded connections (and upgrades awaiting their 101) over every listener (`limits.maxUpgrades`). */
  readonly upgrades: ProcessLoad;
  /**
   * Requests (and handshakes) waiting for a pacing turn or an upstream's pause, over every
   * listener: out of `load` and `upgrades` while they wait (`limits.maxWaiting`).
   */
  readonly waiting: WaitingRoom;
  markStarted(): void;
  /**
   * What starting waits for (run-control.ts: every required prefetched token), asked whenever
   * `started` is read (nothing polls it), so /startup agrees with /readyz the moment the token
   * arrives; it is marked started the first time the condition holds.
   */
  startWhen(condition: () => boolean): void;
  markRunning(): void;
  markDraining(): void;
  markStopped(): void;
}

/** A lifecycle in phase "starting". */
export function createLifecycle(): Lifecycle {
  let phase: LifecyclePhase = "starting";
  let started = false;
  let startCondition: (() => boolean) | undefined;
  const markStarted = (): void => {
    if (started) return;
    started = true;
    startCondition = undefined;
  };
  const load = createProcessLoad();
  const upgrades = createProcessLoad();
  const waiting = createWaitingRoom();
  return {
    load,
    upgrades,
    waiting,
    get phase() {
      return phase;
    },
    get started() {
      if (!started && startCondition?.()) markStarted();
      return started;
    },
    markStarted,
    startWhen: (condition) => {
      startCondition = condition;
    },
    markRunning: () => {
      if (phase === "starting") phase = "running";
    },
    markDraining: () => {
      if (phase !== "stopped") phase = "draining";
    },
    markStopped: () => {
      phase = "stopped";
    },
  };
}
