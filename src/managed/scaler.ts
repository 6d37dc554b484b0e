// The managed pools' scaler, one bounded step of the cron tick (src/index.ts): the running pools
// scaled longest ago, at most MANAGED_POOLS_PER_TICK, each read against its organization's queue,
// connected runners and idle claims, and moved by decideScale (src/managed/decide.ts). A pool's
// runners are judged by the same rules as any runner: label coverage (src/run/labels.ts) and the
// connected window (src/run/waiting.ts).

import { and, asc, count, eq, exists, isNull, lte, ne, or, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Config } from "../config";
import { managedPools, managedSlots } from "../db/managed-schema";
import { labelSets, runs } from "../db/schema";
import type { Env } from "../env";
import { log } from "../lib/log";
import { schedulerStub } from "../lib/stubs";
import { covers } from "../run/labels";
import { connectedRunners, type ConnectedRunner } from "../run/waiting";
import { decideScale, type ScaleAction, type SlotFacts } from "./decide";
import { idleMsOf, labelsOf, slotsOf, slotStatus, type PoolRow, type SlotWithMachine } from "./pools";
import type { ManagedRunnerNamespace } from "./runner-binding";
import { haltSlot, linkMachine, markBusy, startSlot } from "./slots";

/** What one organization's pools are judged against, read once per tick. */
interface OrgFacts {
  /** Label sets of queued runs whose backoff is over. */
  queuedKeys: string[];
  connected: ConnectedRunner[];
  /** Machines whose claim waits for work now. */
  waiting: Set<string>;
  /** Slots of all the organization's pools. */
  instances: number;
}

/** One tick of every pool's scaling; without the MANAGED_RUNNER binding nothing is started or halted. */
export async function scalePools(env: Env, config: Config, nowMs: number): Promise<void> {
  const namespace = env.MANAGED_RUNNER;
  if (!namespace) return;
  await haltStrays(env, config, nowMs);
  const pools = await drizzle(env.DB)
    .select()
    .from(managedPools)
    .where(eq(managedPools.state, "running"))
    .orderBy(asc(managedPools.scaledAtMs), asc(managedPools.id))
    .limit(config.managedPoolsPerTick);
  const slots = await slotsOf(env.DB, pools.map((p) => p.id));
  const orgs = new Map<string, OrgFacts>();
  for (const pool of pools) {
    // One pool's failure is logged and left to the next tick; the others still scale.
    try {
      if (!orgs.has(pool.orgId)) orgs.set(pool.orgId, await readOrgFacts(env, config, pool.orgId, nowMs));
      await scalePool(env, namespace, config, pool, slots.get(pool.id) ?? [], orgs.get(pool.orgId)!, nowMs);
    } catch (err) {
      log("managed.scale_failed", { reason: String(err), org: pool.orgId, pool: pool.id });
    }
    await drizzle(env.DB).update(managedPools).set({ scaledAtMs: nowMs }).where(eq(managedPools.id, pool.id));
  }
}

async function readOrgFacts(env: Env, config: Config, orgId: string, nowMs: number): Promise<OrgFacts> {
  const db = drizzle(env.DB);
  // The label sets with queued work (as claims read them), each kept when a run of it is claimable
  // now: one index probe per set (runs_queue), never a walk over the organization's runs.
  const claimable = db
    .select({ one: sql`1` })
    .from(runs)
    .where(and(eq(runs.orgId, orgId), eq(runs.labelsKey, labelSets.labelsKey), eq(runs.state, "queued"), lte(runs.notBeforeMs, nowMs)));
  const queued = await db
    .select({ key: labelSets.labelsKey })
    .from(labelSets)
    .where(and(eq(labelSets.orgId, orgId), exists(claimable)))
    .limit(config.labelSetsReadMax);
  const instances = await db.select({ n: count() }).from(managedSlots).where(eq(managedSlots.orgId, orgId)).get();
  const connected = await connectedRunners(env.DB, orgId, config, nowMs);
  const waiting = new Set(await schedulerStub(env, orgId).waitingMachines());
  return { queuedKeys: queued.map((q) => q.key), connected, waiting, instances: instances?.n ?? 0 };
}

/** Queued runs the pool's runners could take wait, and no idle connected runner covers them. */
function workWaitsFor(pool: PoolRow, config: Config, org: OrgFacts): boolean {
  const labels = labelsOf(pool);
  const idleCovering = (key: string) => org.connected.some((r) => org.waiting.has(r.id) && covers(key, r.labels, r.protocols));
  return org.queuedKeys.some((key) => covers(key, labels, config.managedRunnerProtocols) && !idleCovering(key));
}

async function scalePool(env: Env, namespace: ManagedRunnerNamespace, config: Config, pool: PoolRow, slots: SlotWithMachine[], org: OrgFacts, nowMs: number): Promise<void> {
  const facts: SlotFacts[] = [];
  for (const slot of slots) facts.push(await slotFacts(env, config, slot, org, nowMs));
  const actions = decideScale(
    {
      minInstances: pool.minInstances,
      maxInstances: pool.maxInstances,
      idleMs: idleMsOf(pool, config),
      slots: facts,
      workWaits: workWaitsFor(pool, config, org),
      otherInstances: org.instances - slots.length,
      instancesMax: config.managedInstancesPerOrgMax,
    },
    nowMs,
  );
  for (const action of actions) await act(env, namespace, config, pool, slots, action, nowMs);
  org.instances += actions.reduce((n, a) => n + (a.kind === "start" ? 1 : -1), 0);
}

/** A slot as the decision sees it; a starting slot whose runner registered is linked to its machine here. */
async function slotFacts(env: Env, config: Config, slot: SlotWithMachine, org: OrgFacts, nowMs: number): Promise<SlotFacts> {
  if (slot.row.machineId === null) {
    const machineId = await linkMachine(env.DB, slot.row);
    if (machineId) {
      slot.row.machineId = machineId;
      // Just registered: heard from now, whatever the joined read said.
      slot.machine = { id: machineId, lastSeenAtMs: nowMs, deregisteredAtMs: null };
    }
  }
  const status = slotStatus(slot, config, nowMs);
  const idle = status === "connected" && org.waiting.has(slot.row.machineId!);
  if (status === "connected" && !idle) {
    await markBusy(env.DB, slot.row, nowMs);
    slot.row.busyAtMs = nowMs;
  }
  return { slot: slot.row.slot, status, idle, busyAtMs: slot.row.busyAtMs };
}

async function act(env: Env, namespace: ManagedRunnerNamespace, config: Config, pool: PoolRow, slots: SlotWithMachine[], action: ScaleAction, nowMs: number): Promise<void> {
  if (action.kind === "start") {
    await startSlot(env, namespace, config, pool, action.slot, nowMs);
    return;
  }
  const slot = slots.find((s) => s.row.slot === action.slot)!;
  const why = { lost: "its runner was lost: it stopped heartbeating or never registered", idle: "its runner took no run for the pool's idle time", above_max: "the pool's maximum was lowered" };
  await haltSlot(env, slot.row, why[action.reason], nowMs);
}

/**
 * Slots whose pool is stopped or gone: a tick that read the pool as running may have started one
 * while an admin stopped or deleted it. They are halted here, a bounded batch per tick.
 */
async function haltStrays(env: Env, config: Config, nowMs: number): Promise<void> {
  const strays = await drizzle(env.DB)
    .select({ slot: managedSlots })
    .from(managedSlots)
    .leftJoin(managedPools, eq(managedPools.id, managedSlots.poolId))
    .where(or(isNull(managedPools.id), ne(managedPools.state, "running")))
    .limit(config.managedPoolsPerTick);
  for (const { slot } of strays) await haltSlot(env, slot, "its pool is stopped or deleted", nowMs);
}

/** Halts every slot of a pool (stop and delete). */
export async function haltPool(env: Env, poolId: string, why: string, nowMs: number): Promise<void> {
  const slots = (await slotsOf(env.DB, [poolId])).get(poolId) ?? [];
  for (const slot of slots) await haltSlot(env, slot.row, why, nowMs);
}
