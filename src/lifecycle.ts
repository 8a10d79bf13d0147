/**
 * The process's lifecycle state, shared by the proxy listener (refuses nothing while draining,
 * but adds `Connection: close`) and admin routes (/readyz fails from the first signal on), and
 * the process-wide request load every listener counts into (/readyz fails on sustained
 * overload; see proxy/overload.ts).
 */
import { createProcessLoad, type ProcessLoad } from "./proxy/overload.js";

export type LifecyclePhase = "starting" | "running" | "draining" | "stopped";

export interface Lifecycle {
  readonly phase: LifecyclePhase;
  /** True once every eagerly fetched upstream had a token at least once (for /startup). */
  readonly started: boolean;
  /** Requests in flight over every proxy listener, and refusals over `limits.maxInFlight`. */
  readonly load: ProcessLoad;
  /** Upgraded connections (and upgrades awaiting their 101) over every listener (`limits.maxUpgrades`). */
  readonly upgrades: ProcessLoad;
  markStarted(): void;
  markRunning(): void;
  markDraining(): void;
  markStopped(): void;
}

/** A lifecycle in phase "starting". */
export function createLifecycle(): Lifecycle {
  let phase: LifecyclePhase = "starting";
  let started = false;
  const load = createProcessLoad();
  const upgrades = createProcessLoad();
  return {
    load,
    upgrades,
    get phase() {
      return phase;
    },
    get started() {
      return started;
    },
    markStarted: () => {
      started = true;
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
