import { sql } from "drizzle-orm";
import { check, index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import { LEDGER_KINDS } from "../protocol/credits";

// The credit ledger and build requests (../shared/spec/build-lifecycle.md). The ledger is
// authoritative in D1 (../shared/DESIGN.md, "D1 holds the queue and the credit ledger"): entries
// are append-only; credit_balances is their running sum, written in the same batch() as the
// entries, and the CHECK below refuses any batch that would make available, held or spent negative.

/** Job statuses whose reservation is still held; a request has at most one such job. */
export const HELD_JOB_STATUSES_SQL = sql.raw(`('dispatch_unconfirmed','queued','cost_review','reconcile')`);

export const creditBalances = sqliteTable(
  "credit_balances",
  {
    orgId: text("org_id").primaryKey(),
    grantedCents: integer("granted_cents").notNull(),
    heldCents: integer("held_cents").notNull(),
    spentCents: integer("spent_cents").notNull(),
    updatedAtMs: integer("updated_at_ms").notNull(),
  },
  // available = granted - held - spent, never negative (DESIGN.md, invariant 5).
  (t) => [check("credit_balances_identity", sql`${t.heldCents} >= 0 AND ${t.spentCents} >= 0 AND ${t.grantedCents} >= ${t.heldCents} + ${t.spentCents}`)],
);

// The kinds are part of the contract (src/protocol/credits.ts).
export { LEDGER_KINDS };
export type LedgerKind = (typeof LEDGER_KINDS)[number];

export const ledgerEntries = sqliteTable(
  "ledger_entries",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id").notNull(),
    /** Per-organization order of the entries, 1, 2, 3… */
    seq: integer("seq").notNull(),
    /** The operation that wrote this entry: entries of one operation are applied to the balance together. */
    opId: text("op_id").notNull(),
    kind: text("kind", { enum: LEDGER_KINDS }).notNull(),
    amountCents: integer("amount_cents").notNull(),
    jobId: text("job_id"),
    requestId: text("request_id"),
    /** An autopilot run's model-spend reservation (run_reservations), instead of a build job. */
    runId: text("run_id"),
    actor: text("actor").notNull(),
    note: text("note"),
    /** A grant's Idempotency-Key, so a repeated grant is granted once. */
    externalKey: text("external_key"),
    createdAtMs: integer("created_at_ms").notNull(),
  },
  (t) => [
    uniqueIndex("ledger_entries_org_seq").on(t.orgId, t.seq),
    index("ledger_entries_op").on(t.opId),
    // A job is reserved once, settled at most once, released at most once, charged at most once.
    uniqueIndex("ledger_entries_job_kind").on(t.orgId, t.jobId, t.kind).where(sql`${t.jobId} IS NOT NULL`),
    // A run's reservation is settled at most once and charged at most once. It may be reserved and
    // released again: a claim the run object refused gives it back, and the next claim holds it anew
    // (src/autopilot/run-budget.ts); the reservation row's compare-and-swap keeps each hold to one.
    uniqueIndex("ledger_entries_run_end").on(t.orgId, t.runId, t.kind).where(sql`${t.runId} IS NOT NULL AND ${t.kind} IN ('settle', 'charge')`),
    uniqueIndex("ledger_entries_external_key").on(t.orgId, t.externalKey).where(sql`${t.externalKey} IS NOT NULL`),
    check("ledger_entries_amount", sql`${t.amountCents} >= 0`),
  ],
);

export const projects = sqliteTable(
  "projects",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id").notNull(),
    name: text("name").notNull(),
    sourceUrl: text("source_url").notNull(),
    launch: text("launch").notNull(), // JSON: {protocol, command, image, env}
    labels: text("labels").notNull(), // JSON array of runner labels, sorted
    licenseName: text("license_name"),
    licenseAcceptedAtMs: integer("license_accepted_at_ms"),
    licenseAcceptedBy: text("license_accepted_by"),
    createdBy: text("created_by").notNull(),
    createdAtMs: integer("created_at_ms").notNull(),
    updatedAtMs: integer("updated_at_ms").notNull(),
  },
  (t) => [index("projects_org").on(t.orgId, t.createdAtMs, t.id)],
);

export const buildRequests = sqliteTable(
  "build_requests",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id").notNull(),
    projectId: text("project_id").notNull(),
    title: text("title").notNull(),
    label: text("label").notNull(),
    // The source plan, saved by the owner (build-lifecycle.md, "From request to reserved job").
    pinnedCommit: text("pinned_commit"),
    migrationPlan: text("migration_plan"),
    chainTarget: text("chain_target"),
    planSavedAtMs: integer("plan_saved_at_ms"),
    planSavedBy: text("plan_saved_by"),
    createdBy: text("created_by").notNull(),
    createdAtMs: integer("created_at_ms").notNull(),
    updatedAtMs: integer("updated_at_ms").notNull(),
  },
  (t) => [
    index("build_requests_org").on(t.orgId, t.createdAtMs, t.id),
    index("build_requests_project").on(t.orgId, t.projectId, t.createdAtMs),
  ],
);

export const buildJobs = sqliteTable(
  "build_jobs",
  {
    orgId: text("org_id").notNull(),
    /** The job id, which is also the Idempotency-Key of its dispatch. */
    id: text("id").notNull(),
    requestId: text("request_id").notNull(),
    projectId: text("project_id").notNull(),
    status: text("status").notNull(),
    outcome: text("outcome"),
    reviewReason: text("review_reason"),
    /** Hash of what the member asked for, to tell a replay from a conflicting reuse of the job id. */
    requestHash: text("request_hash").notNull(),
    // The dispatch payload, fixed when the reservation is made so every retry sends the same.
    sourceUrl: text("source_url").notNull(),
    pinnedCommit: text("pinned_commit").notNull(),
    migrationPlan: text("migration_plan").notNull(),
    chainTarget: text("chain_target").notNull(),
    launch: text("launch").notNull(),
    labels: text("labels").notNull(),
    callbackUrl: text("callback_url").notNull(),
    callbackToken: text("callback_token").notNull(),
    runId: text("run_id"),
    reservedCents: integer("reserved_cents").notNull(),
    costCents: integer("cost_cents"),
    settledCents: integer("settled_cents").notNull(),
    releasedCents: integer("released_cents").notNull(),
    chargedCents: integer("charged_cents").notNull(),
    artifactExists: integer("artifact_exists", { mode: "boolean" }).notNull(),
    artifactEmpty: integer("artifact_empty", { mode: "boolean" }),
    /** The operation that last changed this job; ledger entries are written only for the winner. */
    lastOpId: text("last_op_id").notNull(),
    dispatchAttempts: integer("dispatch_attempts").notNull(),
    dispatchAttemptedAtMs: integer("dispatch_attempted_at_ms").notNull(),
    dispatchConfirmedAtMs: integer("dispatch_confirmed_at_ms"),
    dispatchError: text("dispatch_error"),
    resolutionNote: text("resolution_note"),
    resolvedBy: text("resolved_by"),
    resolvedAtMs: integer("resolved_at_ms"),
    createdBy: text("created_by").notNull(),
    createdAtMs: integer("created_at_ms").notNull(),
    updatedAtMs: integer("updated_at_ms").notNull(),
    endedAtMs: integer("ended_at_ms"),
  },
  (t) => [
    primaryKey({ columns: [t.orgId, t.id] }),
    // At most one job per request holds a reservation: "a request has at most one queued job"
    // (DESIGN.md, invariant 1), and no new paid job before a held one is reconciled.
    uniqueIndex("build_jobs_one_held_per_request").on(t.orgId, t.requestId).where(sql`${t.status} IN ${HELD_JOB_STATUSES_SQL}`),
    uniqueIndex("build_jobs_callback_token").on(t.callbackToken),
    index("build_jobs_org_status").on(t.orgId, t.status, t.createdAtMs),
    index("build_jobs_request").on(t.orgId, t.requestId, t.createdAtMs),
    index("build_jobs_run").on(t.runId),
    // The reconciliation sweep reads unconfirmed dispatches across organizations, oldest attempt first.
    index("build_jobs_status").on(t.status, t.dispatchAttemptedAtMs),
    check(
      "build_jobs_money",
      sql`${t.reservedCents} >= 0 AND ${t.settledCents} >= 0 AND ${t.releasedCents} >= 0 AND ${t.chargedCents} >= 0 AND ${t.settledCents} + ${t.releasedCents} <= ${t.reservedCents}`,
    ),
  ],
);

/**
 * The model-spend reservation of an autopilot run (docs/protocol.md, "Autopilot scheduler"): taken
 * from the organization's credit when the scheduler first hands the run out, settled once when the
 * run ends, as a build job's is (src/builds/reserve.ts, src/builds/settle.ts).
 */
export const runReservations = sqliteTable(
  "run_reservations",
  {
    orgId: text("org_id").notNull(),
    runId: text("run_id").notNull(),
    projectId: text("project_id").notNull(),
    /** held, settled, released (never dispatched), cost_review or reconcile (kept held for an admin). */
    status: text("status").notNull(),
    reservedCents: integer("reserved_cents").notNull(),
    costCents: integer("cost_cents"),
    settledCents: integer("settled_cents").notNull(),
    releasedCents: integer("released_cents").notNull(),
    /** A resolved cost above the reservation, charged to available credit. */
    chargedCents: integer("charged_cents").notNull().default(0),
    /** An admin's resolution of a reservation held for cost review or reconciliation. */
    resolutionNote: text("resolution_note"),
    resolvedBy: text("resolved_by"),
    resolvedAtMs: integer("resolved_at_ms"),
    lastOpId: text("last_op_id").notNull(),
    createdAtMs: integer("created_at_ms").notNull(),
    updatedAtMs: integer("updated_at_ms").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.orgId, t.runId] }),
    index("run_reservations_project").on(t.orgId, t.projectId, t.status),
    check("run_reservations_money", sql`${t.reservedCents} >= 0 AND ${t.settledCents} >= 0 AND ${t.releasedCents} >= 0 AND ${t.settledCents} + ${t.releasedCents} <= ${t.reservedCents}`),
  ],
);
