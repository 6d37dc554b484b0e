// What a managed pool does at one cron tick, as a pure function of what the scaler read
// (docs/managed-runners.md, "Scaling"): at most one start and, per lost slot, one halt, so every
// tick's work is bounded and a pool moves one instance at a time.

import type { SlotStatus } from "./pools";

export interface SlotFacts {
  slot: number;
  status: SlotStatus;
  /** Its runner waits for work now (its claim is waiting in the scheduler). */
  idle: boolean;
  /** The last time it was seen working, or its start. */
  busyAtMs: number;
}

export interface PoolFacts {
  minInstances: number;
  maxInstances: number;
  idleMs: number;
  slots: SlotFacts[];
  /** Queued runs its labels cover wait with no idle connected runner to take them. */
  workWaits: boolean;
  /** Instances the organization's other pools run, and the most it may run (MANAGED_INSTANCES_PER_ORG_MAX). */
  otherInstances: number;
  instancesMax: number;
}

export type ScaleAction =
  | { kind: "halt"; slot: number; reason: "lost" | "idle" | "above_max" }
  | { kind: "start"; slot: number; reason: "below_min" | "work_waits" };

/**
 * Lost slots are halted; then one slot starts when the pool is below its minimum, or when work
 * waits and none of its slots is still starting (that one will take it), within its maximum and
 * the organization's cap; else one idle slot past its idle time (or any idle slot above a lowered
 * maximum) is halted while the pool stays at its minimum or above.
 */
export function decideScale(pool: PoolFacts, nowMs: number): ScaleAction[] {
  const lost = pool.slots.filter((s) => s.status === "lost");
  const kept = pool.slots.filter((s) => s.status !== "lost");
  const actions: ScaleAction[] = lost.map((s) => ({ kind: "halt", slot: s.slot, reason: "lost" }));
  const start = startReason(pool, kept);
  if (start) return [...actions, { kind: "start", slot: freeSlot(pool.slots), reason: start }];
  const down = haltOne(pool, kept, nowMs);
  return down ? [...actions, down] : actions;
}

function startReason(pool: PoolFacts, kept: SlotFacts[]): "below_min" | "work_waits" | null {
  if (kept.length >= pool.maxInstances || pool.otherInstances + kept.length >= pool.instancesMax) return null;
  if (kept.length < pool.minInstances) return "below_min";
  if (pool.workWaits && !kept.some((s) => s.status === "starting")) return "work_waits";
  return null;
}

function haltOne(pool: PoolFacts, kept: SlotFacts[], nowMs: number): ScaleAction | null {
  if (kept.length <= pool.minInstances) return null;
  // The longest idle first.
  const idle = kept.filter((s) => s.status === "connected" && s.idle).sort((a, b) => a.busyAtMs - b.busyAtMs);
  if (idle.length === 0) return null;
  if (kept.length > pool.maxInstances) return { kind: "halt", slot: idle[0].slot, reason: "above_max" };
  if (nowMs - idle[0].busyAtMs >= pool.idleMs) return { kind: "halt", slot: idle[0].slot, reason: "idle" };
  return null;
}

/** The lowest slot number no slot of the pool holds (a lost one is halted first, so its number is free again next tick). */
function freeSlot(slots: SlotFacts[]): number {
  const taken = new Set(slots.map((s) => s.slot));
  let slot = 0;
  while (taken.has(slot)) slot += 1;
  return slot;
}
