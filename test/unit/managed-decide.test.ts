// A managed pool's decision at one tick (src/managed/decide.ts), without a runtime: which container
// starts or is halted, given its slots and the queue (docs/managed-runners.md, "Scaling").

import { describe, expect, it } from "vitest";
import { decideScale, type PoolFacts, type SlotFacts } from "../../src/managed/decide";

const NOW = 1_000_000;
const pool = (facts: Partial<PoolFacts>): PoolFacts => ({
  minInstances: 0,
  maxInstances: 3,
  idleMs: 60_000,
  slots: [],
  workWaits: false,
  otherInstances: 0,
  instancesMax: 10,
  ...facts,
});
const slot = (n: number, facts: Partial<SlotFacts> = {}): SlotFacts => ({ slot: n, status: "connected", idle: false, busyAtMs: NOW, ...facts });

describe("a managed pool's decision", () => {
  it("a lost slot is halted and, below the minimum, replaced in the same tick under a number no slot holds", () => {
    const actions = decideScale(pool({ minInstances: 1, slots: [slot(0, { status: "lost" })] }), NOW);
    expect(actions).toEqual([
      { kind: "halt", slot: 0, reason: "lost" },
      { kind: "start", slot: 1, reason: "below_min" },
    ]);
  });

  it("a lost slot at or above the minimum with no waiting work is halted and not replaced", () => {
    expect(decideScale(pool({ slots: [slot(0, { status: "lost" })] }), NOW)).toEqual([{ kind: "halt", slot: 0, reason: "lost" }]);
  });

  it("waiting work starts one slot, none while a slot is still starting, and none at the maximum or the organization's cap", () => {
    expect(decideScale(pool({ workWaits: true, slots: [slot(0), slot(2)] }), NOW)).toEqual([{ kind: "start", slot: 1, reason: "work_waits" }]);
    expect(decideScale(pool({ workWaits: true, slots: [slot(0, { status: "starting" })] }), NOW)).toEqual([]);
    expect(decideScale(pool({ workWaits: true, maxInstances: 1, slots: [slot(0)] }), NOW)).toEqual([]);
    expect(decideScale(pool({ workWaits: true, otherInstances: 9, slots: [slot(0)] }), NOW)).toEqual([]);
  });

  it("the slot idle longest is halted once past the idle time, never below the minimum and never a busy one", () => {
    const slots = [slot(0, { idle: true, busyAtMs: NOW - 70_000 }), slot(1, { idle: true, busyAtMs: NOW - 90_000 }), slot(2, { busyAtMs: NOW - 600_000 })];
    expect(decideScale(pool({ slots }), NOW)).toEqual([{ kind: "halt", slot: 1, reason: "idle" }]);
    expect(decideScale(pool({ slots, minInstances: 3 }), NOW)).toEqual([]);
    expect(decideScale(pool({ slots: [slot(0, { idle: true, busyAtMs: NOW - 30_000 })] }), NOW)).toEqual([]);
    expect(decideScale(pool({ slots: [slot(0, { busyAtMs: NOW - 600_000 })] }), NOW)).toEqual([]);
  });

  it("above a lowered maximum an idle slot is halted at once, a busy one never", () => {
    expect(decideScale(pool({ maxInstances: 1, slots: [slot(0), slot(1, { idle: true })] }), NOW)).toEqual([{ kind: "halt", slot: 1, reason: "above_max" }]);
    expect(decideScale(pool({ maxInstances: 1, slots: [slot(0), slot(1)] }), NOW)).toEqual([]);
  });
});
