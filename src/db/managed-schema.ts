import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

// Managed runner pools (docs/managed-runners.md): an organization's pools of runner containers that
// Docket starts in Cloudflare Containers, and each pool's slots. A slot's runner registers through
// the public registration endpoint like any machine (../shared/spec/dispatch-lifecycle.md,
// "Decisions": one registry, one claim endpoint), so a slot only remembers which machine it became.

export const managedPools = sqliteTable(
  "managed_pools",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id").notNull(),
    name: text("name").notNull(),
    labels: text("labels").notNull(), // JSON array, sorted: the labels its runners register with
    minInstances: integer("min_instances").notNull(),
    maxInstances: integer("max_instances").notNull(),
    // How long a slot's runner may take no run before the pool halts it; null: MANAGED_POOL_IDLE_MS.
    idleMs: integer("idle_ms"),
    state: text("state", { enum: ["running", "stopped"] }).notNull(),
    createdBy: text("created_by").notNull(),
    createdAtMs: integer("created_at_ms").notNull(),
    updatedAtMs: integer("updated_at_ms").notNull(),
    // When the scaler last visited the pool: the least recently visited go first (src/managed/scaler.ts).
    scaledAtMs: integer("scaled_at_ms").notNull().default(0),
    // The pool's last halted container (JSON: slot, runner_name, machine_id, reason, at_ms): its row
    // goes when it is halted, and this is how the console still says which one stopped and why.
    lastHalt: text("last_halt"),
  },
  (t) => [uniqueIndex("managed_pools_name").on(t.orgId, t.name), index("managed_pools_org").on(t.orgId, t.createdAtMs, t.id), index("managed_pools_scaled").on(t.state, t.scaledAtMs)],
);

export const managedSlots = sqliteTable(
  "managed_slots",
  {
    poolId: text("pool_id").notNull(),
    slot: integer("slot").notNull(),
    orgId: text("org_id").notNull(),
    // The container's Durable Object name (`<org>:<pool>:<slot>`) and the name its runner registers with.
    instanceName: text("instance_name").notNull(),
    runnerName: text("runner_name").notNull(),
    // The registration token minted for this launch (listed with the organization's tokens).
    tokenId: text("token_id").notNull(),
    // The machine its runner registered as; null until it has.
    machineId: text("machine_id"),
    startedAtMs: integer("started_at_ms").notNull(),
    // The last time the scaler saw its runner busy (not waiting for work); its idle time runs from here.
    busyAtMs: integer("busy_at_ms").notNull(),
  },
  (t) => [primaryKey({ columns: [t.poolId, t.slot] }), index("managed_slots_org").on(t.orgId)],
);
