// Starting and halting one slot of a managed pool. A slot's container gets a registration token
// minted through the ordinary token path (one registration, short-lived, listed with the
// organization's tokens) and registers through POST /v1/runners/register like any runner: no route
// or token kind exists for managed runners alone (../shared/spec/dispatch-lifecycle.md, "Decisions").

import { and, eq, gte, isNull } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Config } from "../config";
import { deregisterMachine } from "../credentials/machines";
import { createToken, revokeToken } from "../credentials/tokens";
import { managedPools, managedSlots } from "../db/managed-schema";
import { machines } from "../db/schema";
import type { Env } from "../env";
import { randomHex } from "../lib/crypto";
import { log } from "../lib/log";
import type { ManagedSlotHalt } from "../protocol/managed";
import { schedulerStub } from "../lib/stubs";
import { labelsOf, type PoolRow, type SlotRow } from "./pools";
import { instanceNameOf, runnerInstance, type ManagedRunnerNamespace } from "./runner-binding";

/**
 * Starts slot `slot` of the pool: its row first (so a launch that fails is found and replaced like
 * any lost slot), then the container. The runner registers as `<pool>-<slot>-<random>`, a name
 * no earlier launch of the slot had, so its machine is told apart from the one it replaces.
 */
export async function startSlot(env: Env, namespace: ManagedRunnerNamespace, config: Config, pool: PoolRow, slot: number, nowMs: number): Promise<SlotRow> {
  const labels = labelsOf(pool);
  const runnerName = `${pool.name}-${slot}-${randomHex(4)}`;
  const token = await createToken(env.DB, pool.orgId, "registration", null, `managed pool ${pool.name} slot ${slot}${labels.length ? ` (${labels.join(", ")})` : ""}`, {
    createdAtMs: nowMs,
    expiresAtMs: nowMs + config.managedRegistrationTokenTtlMs,
    maxUses: 1,
  });
  const row: SlotRow = {
    poolId: pool.id,
    slot,
    orgId: pool.orgId,
    instanceName: instanceNameOf(pool.orgId, pool.id, slot),
    runnerName,
    tokenId: token.id,
    machineId: null,
    startedAtMs: nowMs,
    busyAtMs: nowMs,
  };
  await drizzle(env.DB).insert(managedSlots).values(row);
  try {
    await runnerInstance(namespace, row.instanceName).launch({ registrationToken: token.token, name: runnerName, labels });
    log("managed.slot_started", { reason: "the pool scaled up", org: pool.orgId, pool: pool.id, slot, runner_name: runnerName, token: token.id });
  } catch (err) {
    // The row stays: the slot counts as starting until MANAGED_SLOT_REGISTER_TIMEOUT_MS, then it is lost and replaced.
    log("managed.slot_launch_failed", { reason: String(err), org: pool.orgId, pool: pool.id, slot });
  }
  return row;
}

/**
 * Halts a slot: its container stops, its machine is deregistered (its token revoked, its waiting
 * claim ended; attempts it held are taken back when their leases lapse, as for any runner), its
 * unused registration token is revoked and its row goes. Without the binding the container is left
 * to Cloudflare; everything else still happens.
 */
export async function haltSlot(env: Env, slot: SlotRow, why: string, nowMs: number): Promise<void> {
  const namespace = env.MANAGED_RUNNER;
  if (namespace) {
    try {
      await runnerInstance(namespace, slot.instanceName).halt();
    } catch (err) {
      // A container that cannot be reached is gone already, or stops on its own: the slot is released either way.
      log("managed.slot_halt_failed", { reason: String(err), org: slot.orgId, pool: slot.poolId, slot: slot.slot });
    }
  }
  // Its token first, so no registration follows; then the machine, which may have registered since the last tick.
  await revokeToken(env.DB, slot.orgId, slot.tokenId, nowMs);
  const machineId = slot.machineId ?? (await linkMachine(env.DB, slot));
  if (machineId) {
    await deregisterMachine(env.DB, slot.orgId, machineId, nowMs);
    await schedulerStub(env, slot.orgId).forgetMachine(machineId);
  }
  await drizzle(env.DB)
    .delete(managedSlots)
    .where(and(eq(managedSlots.poolId, slot.poolId), eq(managedSlots.slot, slot.slot), eq(managedSlots.startedAtMs, slot.startedAtMs)));
  // The row is gone; the pool keeps which container stopped and why, for its answer and the console.
  const halt: ManagedSlotHalt = { slot: slot.slot, runner_name: slot.runnerName, machine_id: machineId, reason: why, at_ms: nowMs };
  await drizzle(env.DB).update(managedPools).set({ lastHalt: JSON.stringify(halt) }).where(eq(managedPools.id, slot.poolId));
  log("managed.slot_halted", { reason: why, org: slot.orgId, pool: slot.poolId, slot: slot.slot, machine: machineId });
}

/**
 * The machine a starting slot's runner registered as, found by the name it was launched with and
 * recorded on the slot; null while it has not registered.
 */
export async function linkMachine(db: D1Database, slot: SlotRow): Promise<string | null> {
  const orm = drizzle(db);
  const machine = await orm
    .select({ id: machines.id })
    .from(machines)
    .where(and(eq(machines.orgId, slot.orgId), eq(machines.name, slot.runnerName), gte(machines.registeredAtMs, slot.startedAtMs), isNull(machines.deregisteredAtMs)))
    .get();
  if (!machine) return null;
  await orm
    .update(managedSlots)
    .set({ machineId: machine.id })
    .where(and(eq(managedSlots.poolId, slot.poolId), eq(managedSlots.slot, slot.slot), isNull(managedSlots.machineId)));
  return machine.id;
}

/** Records that the slot's runner was seen working: its idle time starts again. */
export async function markBusy(db: D1Database, slot: SlotRow, nowMs: number): Promise<void> {
  await drizzle(db)
    .update(managedSlots)
    .set({ busyAtMs: nowMs })
    .where(and(eq(managedSlots.poolId, slot.poolId), eq(managedSlots.slot, slot.slot)));
}
