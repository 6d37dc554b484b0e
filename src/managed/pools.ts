// Managed runner pools as stored and as answered (docs/managed-runners.md): a pool's row, its input
// checked against the configured limits, and each slot's status from the machine its runner became.

import { and, eq, gte, inArray, isNull, or, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Config } from "../config";
import { managedPools, managedSlots } from "../db/managed-schema";
import { machines } from "../db/schema";
import { DocketError } from "../errors";
import type { CreateManagedPoolBody, ManagedPool, ManagedSlotHalt, UpdateManagedPoolBody } from "../protocol/managed";
import { normalizeLabels } from "../run/labels";

export type PoolRow = typeof managedPools.$inferSelect;
export type SlotRow = typeof managedSlots.$inferSelect;
type MachineRow = typeof machines.$inferSelect;

export type SlotStatus = "starting" | "connected" | "lost";

/** A slot with the machine its runner registered as (null until it has). */
export interface SlotWithMachine {
  row: SlotRow;
  machine: Pick<MachineRow, "id" | "lastSeenAtMs" | "deregisteredAtMs"> | null;
}

/**
 * A slot's runner is lost as any runner is: its machine was not heard from within
 * RUNNER_CONNECTED_WINDOW_MS (the window GET /v1/queue and build dispatch judge runners by,
 * src/run/waiting.ts) or was deregistered; before it registered, a container that has not
 * registered within MANAGED_SLOT_REGISTER_TIMEOUT_MS is lost.
 */
export function slotStatus(slot: SlotWithMachine, config: Config, nowMs: number): SlotStatus {
  if (slot.machine === null && slot.row.machineId === null) return nowMs - slot.row.startedAtMs <= config.managedSlotRegisterTimeoutMs ? "starting" : "lost";
  const machine = slot.machine;
  if (!machine || machine.deregisteredAtMs !== null) return "lost";
  return machine.lastSeenAtMs >= nowMs - config.runnerConnectedWindowMs ? "connected" : "lost";
}

/** The pool's idle time: its own, else MANAGED_POOL_IDLE_MS. */
export function idleMsOf(pool: PoolRow, config: Config): number {
  return pool.idleMs ?? config.managedPoolIdleMs;
}

export function labelsOf(pool: PoolRow): string[] {
  return JSON.parse(pool.labels) as string[];
}

/** A pool of `orgId`, or 404 (another organization's pools are never found). */
export async function loadPool(db: D1Database, orgId: string, id: string): Promise<PoolRow> {
  const row = await drizzle(db)
    .select()
    .from(managedPools)
    .where(and(eq(managedPools.orgId, orgId), eq(managedPools.id, id)))
    .get();
  if (!row) throw new DocketError("not_found", `no managed pool ${id} in this organization`);
  return row;
}

/**
 * The machine a slot's runner became: the one recorded on the slot, or, before the next tick records
 * it (src/managed/slots.ts, linkMachine), the one registered since the slot started under the name it
 * was launched with, so a pool read between ticks shows the runner that took its run, not "starting".
 */
const slotMachine = or(
  eq(machines.id, managedSlots.machineId),
  and(isNull(managedSlots.machineId), eq(machines.name, managedSlots.runnerName), gte(machines.registeredAtMs, managedSlots.startedAtMs)),
);

/** The slots of these pools with their machines, by pool, in slot order. */
export async function slotsOf(db: D1Database, poolIds: string[]): Promise<Map<string, SlotWithMachine[]>> {
  const bySlot = new Map<string, SlotWithMachine[]>(poolIds.map((id) => [id, []]));
  if (poolIds.length === 0) return bySlot;
  const rows = await drizzle(db)
    .select({ row: managedSlots, id: machines.id, lastSeenAtMs: machines.lastSeenAtMs, deregisteredAtMs: machines.deregisteredAtMs })
    .from(managedSlots)
    .leftJoin(machines, and(eq(machines.orgId, managedSlots.orgId), slotMachine))
    .where(inArray(managedSlots.poolId, poolIds))
    .orderBy(managedSlots.poolId, managedSlots.slot);
  for (const { row, id, lastSeenAtMs, deregisteredAtMs } of rows) {
    bySlot.get(row.poolId)!.push({ row, machine: id === null || lastSeenAtMs === null ? null : { id, lastSeenAtMs, deregisteredAtMs } });
  }
  return bySlot;
}

/** A pool as every answer shows it: its settings, its slots and what its running instances cost. */
export function poolAnswer(pool: PoolRow, slots: SlotWithMachine[], config: Config, nowMs: number): ManagedPool {
  return {
    id: pool.id,
    name: pool.name,
    labels: labelsOf(pool),
    min_instances: pool.minInstances,
    max_instances: pool.maxInstances,
    idle_ms: idleMsOf(pool, config),
    state: pool.state,
    last_halt: pool.lastHalt === null ? null : (JSON.parse(pool.lastHalt) as ManagedSlotHalt),
    slots: slots.map((s) => ({
      slot: s.row.slot,
      status: slotStatus(s, config, nowMs),
      instance_name: s.row.instanceName,
      runner_name: s.row.runnerName,
      registration_token_id: s.row.tokenId,
      machine_id: s.row.machineId ?? s.machine?.id ?? null,
      started_at_ms: s.row.startedAtMs,
      machine_last_seen_at_ms: s.machine?.lastSeenAtMs ?? null,
      busy_at_ms: s.row.busyAtMs,
    })),
    estimated_cost: {
      instance_hour_millicents: config.managedInstanceHourMillicents,
      running_hour_millicents: slots.length * config.managedInstanceHourMillicents,
    },
    created_at_ms: pool.createdAtMs,
    updated_at_ms: pool.updatedAtMs,
  };
}

/** Pools as answers, their slots read in one query. */
export async function poolAnswers(db: D1Database, config: Config, pools: PoolRow[], nowMs: number): Promise<ManagedPool[]> {
  const slots = await slotsOf(db, pools.map((p) => p.id));
  return pools.map((pool) => poolAnswer(pool, slots.get(pool.id) ?? [], config, nowMs));
}

/** The configured limits a pool's numbers must keep (checked after the schema's ceilings). */
function checkPoolNumbers(config: Config, pool: { minInstances: number; maxInstances: number; idleMs: number | null }): void {
  if (pool.maxInstances > config.managedInstancesPerOrgMax) {
    throw new DocketError("invalid_request", `body max_instances: at most ${config.managedInstancesPerOrgMax} (MANAGED_INSTANCES_PER_ORG_MAX)`, {
      field: "max_instances",
      max: config.managedInstancesPerOrgMax,
    });
  }
  if (pool.minInstances > pool.maxInstances) {
    throw new DocketError("invalid_request", `body min_instances: ${pool.minInstances} is more than max_instances ${pool.maxInstances}`, { field: "min_instances" });
  }
  if (pool.idleMs !== null && pool.idleMs > config.managedPoolIdleMaxMs) {
    throw new DocketError("invalid_request", `body idle_ms: at most ${config.managedPoolIdleMaxMs} (MANAGED_POOL_IDLE_MAX_MS)`, { field: "idle_ms", max: config.managedPoolIdleMaxMs });
  }
}

/** A new pool's row; the caller has checked the organization's pool count. */
export function newPoolRow(config: Config, ids: { id: string; orgId: string; createdBy: string }, body: CreateManagedPoolBody, nowMs: number): PoolRow {
  const row: PoolRow = {
    ...ids,
    name: body.name,
    labels: JSON.stringify(normalizeLabels(body.labels ?? [])),
    minInstances: body.min_instances ?? 0,
    maxInstances: body.max_instances,
    idleMs: body.idle_ms ?? null,
    state: body.state ?? "running",
    createdAtMs: nowMs,
    updatedAtMs: nowMs,
    scaledAtMs: 0,
    lastHalt: null,
  };
  checkPoolNumbers(config, row);
  return row;
}

/** The pool with the fields sent changed; the others keep their value. */
export function changedPoolRow(config: Config, pool: PoolRow, body: UpdateManagedPoolBody, nowMs: number): PoolRow {
  const row: PoolRow = {
    ...pool,
    labels: body.labels === undefined ? pool.labels : JSON.stringify(normalizeLabels(body.labels)),
    minInstances: body.min_instances ?? pool.minInstances,
    maxInstances: body.max_instances ?? pool.maxInstances,
    idleMs: body.idle_ms === undefined ? pool.idleMs : body.idle_ms,
    updatedAtMs: nowMs,
  };
  checkPoolNumbers(config, row);
  return row;
}

/**
 * Writes a new pool in one conditional statement, so concurrent creations never take the
 * organization past MANAGED_POOLS_PER_ORG_MAX: past it, 409 managed_pool_limit and nothing written.
 * The select lists the columns in the table's order, as drizzle names them in the INSERT.
 */
export async function insertPoolWithinLimit(db: D1Database, config: Config, row: PoolRow): Promise<void> {
  const p = managedPools;
  const fewer = sql`(SELECT count(*) FROM ${p} WHERE ${p.orgId} = ${row.orgId}) < ${config.managedPoolsPerOrgMax}`;
  const values = sql`SELECT ${row.id}, ${row.orgId}, ${row.name}, ${row.labels}, ${row.minInstances}, ${row.maxInstances}, ${row.idleMs}, ${row.state}, ${row.createdBy}, ${row.createdAtMs}, ${row.updatedAtMs}, ${row.scaledAtMs}, ${row.lastHalt} WHERE ${fewer}`;
  const result = await drizzle(db).insert(p).select(values);
  if (result.meta.changes === 1) return;
  throw new DocketError("managed_pool_limit", `this organization already has ${config.managedPoolsPerOrgMax} managed pools (MANAGED_POOLS_PER_ORG_MAX)`, {
    limit: config.managedPoolsPerOrgMax,
  });
}
