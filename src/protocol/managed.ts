// Managed runner pools: per organization, runner containers Docket starts in Cloudflare Containers,
// which register and claim like any runner (../shared/spec/dispatch-lifecycle.md, "Decisions";
// docs/managed-runners.md).

import { z } from "zod";
import { epochMs, keysetCursor, labelList, machineId, page, pageQuery, prefixedId, tokenId } from "./common.js";

export const managedPoolId = prefixedId("mpl", "a managed pool");

/** A pool's name: its runners' machine names start with it, so it is kept to what a name may hold. */
const poolName = z
  .string()
  .min(1)
  .max(48)
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]*$/, "a pool name is letters, digits and _ . - (starting with a letter or digit)");

/** Instances: the schema's ceiling; MANAGED_INSTANCES_PER_ORG_MAX is checked after the parse. */
const instances = z.number().int().min(0).max(1_000);
/** Idle time in ms: the schema's ceiling; MANAGED_POOL_IDLE_MAX_MS is checked after the parse. */
const idleMs = z.number().int().min(1_000).max(604_800_000);

export const CreateManagedPoolBody = z
  .object({
    name: poolName,
    labels: labelList.optional(),
    min_instances: instances.optional(),
    max_instances: instances.min(1),
    idle_ms: idleMs.optional(),
    // A pool starts scaling at once unless created stopped.
    state: z.enum(["running", "stopped"]).optional(),
  })
  .strict();
export type CreateManagedPoolBody = z.infer<typeof CreateManagedPoolBody>;

/** Only the fields sent change; `idle_ms: null` goes back to MANAGED_POOL_IDLE_MS. */
export const UpdateManagedPoolBody = z
  .object({
    labels: labelList.optional(),
    min_instances: instances.optional(),
    max_instances: instances.min(1).optional(),
    idle_ms: idleMs.nullable().optional(),
  })
  .strict();
export type UpdateManagedPoolBody = z.infer<typeof UpdateManagedPoolBody>;

export const ManagedPoolPath = z.object({ id: managedPoolId });

export const ListManagedPoolsQuery = z.object(pageQuery(keysetCursor("mpl_[0-9a-f]{24}"))).strict();

/** One container of a pool and the machine its runner registered as. */
export const ManagedSlot = z.object({
  slot: z.number().int(),
  /** starting: launched, its runner not registered yet; connected: its machine is heard from; lost: neither, it is replaced at the next tick. */
  status: z.enum(["starting", "connected", "lost"]),
  instance_name: z.string(),
  runner_name: z.string(),
  /** The registration token minted for its launch (GET /v1/tokens lists it). */
  registration_token_id: tokenId,
  machine_id: machineId.nullable(),
  started_at_ms: epochMs,
  machine_last_seen_at_ms: epochMs.nullable(),
  /** The last time its runner was seen working (or started); its idle time runs from here. */
  busy_at_ms: epochMs,
}).meta({ id: "ManagedSlot" });

/** A container the pool halted: which one, the machine its runner was, when and why. */
export const ManagedSlotHalt = z.object({
  slot: z.number().int(),
  runner_name: z.string(),
  machine_id: machineId.nullable(),
  /** Why it was halted, in words: idle past the pool's idle time, lost, above a lowered maximum, or its pool stopped. */
  reason: z.string(),
  at_ms: epochMs,
}).meta({ id: "ManagedSlotHalt" });
export type ManagedSlotHalt = z.infer<typeof ManagedSlotHalt>;

export const ManagedPool = z.object({
  id: managedPoolId,
  name: z.string(),
  labels: z.array(z.string()),
  min_instances: z.number().int(),
  max_instances: z.number().int(),
  /** The pool's idle time: its own, or MANAGED_POOL_IDLE_MS when it set none. */
  idle_ms: z.number().int(),
  state: z.enum(["running", "stopped"]),
  slots: z.array(ManagedSlot),
  /** The last container the pool halted (its slot is gone from slots); null before the first. */
  last_halt: ManagedSlotHalt.nullable(),
  /** An estimate from MANAGED_INSTANCE_HOUR_MILLICENTS (thousandths of a cent): per instance-hour, and for the instances it runs now. */
  estimated_cost: z.object({
    instance_hour_millicents: z.number().int(),
    running_hour_millicents: z.number().int(),
  }),
  created_at_ms: epochMs,
  updated_at_ms: epochMs,
}).meta({ id: "ManagedPool" });

export const ManagedPoolPage = page("pools", ManagedPool);
export type ManagedPool = z.infer<typeof ManagedPool>;
