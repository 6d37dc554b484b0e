import { sqliteTable, text, integer, index, uniqueIndex, primaryKey } from "drizzle-orm/sqlite-core";

// D1 holds what spans runs: organizations, credentials, machines, the queue projection of the run
// objects, idempotency keys and the sweep watermark (../shared/DESIGN.md, "The shape").

export const orgs = sqliteTable("orgs", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  callbackSecret: text("callback_secret").notNull(),
  createdAtMs: integer("created_at_ms").notNull(),
  // The secret a rotation replaced: callbacks are signed with both until the overlap window ends.
  previousCallbackSecret: text("previous_callback_secret"),
  callbackSecretRotatedAtMs: integer("callback_secret_rotated_at_ms"),
});

export const tokens = sqliteTable(
  "tokens",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id").notNull(),
    kind: text("kind", { enum: ["member", "registration", "machine"] }).notNull(),
    role: text("role", { enum: ["admin", "member"] }),
    name: text("name"),
    tokenHash: text("token_hash").notNull(),
    machineId: text("machine_id"),
    createdAtMs: integer("created_at_ms").notNull(),
    revokedAtMs: integer("revoked_at_ms"),
    // Registration tokens expire, and may be limited to a number of registrations.
    expiresAtMs: integer("expires_at_ms"),
    maxUses: integer("max_uses"),
    uses: integer("uses").notNull().default(0),
  },
  (t) => [uniqueIndex("tokens_hash").on(t.tokenHash), index("tokens_org").on(t.orgId, t.createdAtMs, t.id)],
);

export const machines = sqliteTable(
  "machines",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id").notNull(),
    name: text("name").notNull(),
    labels: text("labels").notNull(), // JSON array, sorted
    protocols: text("protocols").notNull(), // JSON array
    cliVersion: text("cli_version").notNull(),
    registeredAtMs: integer("registered_at_ms").notNull(),
    lastSeenAtMs: integer("last_seen_at_ms").notNull(),
    // Set when an admin deregisters the machine; its machine token is revoked with it.
    deregisteredAtMs: integer("deregistered_at_ms"),
  },
  (t) => [index("machines_org").on(t.orgId, t.registeredAtMs)],
);

// The queue and run index: a projection of each RunObject, written only with a newer version.
export const runs = sqliteTable(
  "runs",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id").notNull(),
    state: text("state").notNull(),
    attempt: integer("attempt").notNull(),
    version: integer("version").notNull(),
    labelsKey: text("labels_key").notNull(),
    protocol: text("protocol").notNull(),
    // Queue order, all ascending so one index serves it: continuations (0) before new work (1),
    // then higher priority (stored negated), then oldest, then id (../shared/spec/run-lifecycle.md, "Queue and dispatch").
    orderGroup: integer("order_group").notNull(),
    orderPriority: integer("order_priority").notNull(),
    queuedAtMs: integer("queued_at_ms").notNull(),
    notBeforeMs: integer("not_before_ms").notNull(),
    createdAtMs: integer("created_at_ms").notNull(),
    updatedAtMs: integer("updated_at_ms").notNull(),
    // The autopilot project of an admitted run: the scheduler skips runs of a project whose gates are closed.
    projectId: text("project_id"),
    // What the runs list shows without reading each run object (src/run/projection.ts, listed): the
    // brief's first line (at most RUN_TITLE_MAX_CHARS), the repository's URL, the machine of the
    // latest attempt, the first claim and the end. Null on rows written before they existed.
    title: text("title"),
    repositoryUrl: text("repository_url"),
    machineId: text("machine_id"),
    startedAtMs: integer("started_at_ms"),
    endedAtMs: integer("ended_at_ms"),
  },
  (t) => [
    index("runs_queue").on(t.orgId, t.labelsKey, t.state, t.orderGroup, t.orderPriority, t.queuedAtMs, t.id),
    index("runs_list").on(t.orgId, t.createdAtMs, t.id),
    index("runs_list_state").on(t.orgId, t.state, t.createdAtMs, t.id),
    // The runs list's filter by project (GET /v1/runs), newest first; by machine: run_machines.
    index("runs_list_project").on(t.orgId, t.projectId, t.createdAtMs, t.id),
    // The cron's alarm backstop walks unfinished runs of every organization (src/alarm-backstop.ts).
    index("runs_unfinished").on(t.state, t.id),
  ],
);

// The machines that claimed each run, one row per run and machine, keyed for the runs list's filter by
// machine (GET /v1/runs?machine_id=, a runner's page): every run a machine took in any attempt,
// newest first, with the run's creation time as the runs list orders it. Written with the run's queue
// row (src/run/projection.ts); the table is WITHOUT ROWID (migrations/0025), so its key is its one
// index and a new row costs a claim one row written.
export const runMachines = sqliteTable(
  "run_machines",
  {
    orgId: text("org_id").notNull(),
    machineId: text("machine_id").notNull(),
    runCreatedAtMs: integer("run_created_at_ms").notNull(),
    runId: text("run_id").notNull(),
  },
  (t) => [primaryKey({ columns: [t.orgId, t.machineId, t.runCreatedAtMs, t.runId] })],
);

// Label sets with queued work, so a claim reads only the heads of the sets a runner covers. A queued
// run's projection adds its set; the scheduler removes a set whose queue it finds empty.
export const labelSets = sqliteTable(
  "label_sets",
  {
    orgId: text("org_id").notNull(),
    labelsKey: text("labels_key").notNull(),
    createdAtMs: integer("created_at_ms").notNull(),
  },
  (t) => [primaryKey({ columns: [t.orgId, t.labelsKey] })],
);

export const idempotencyKeys = sqliteTable(
  "idempotency_keys",
  {
    orgId: text("org_id").notNull(),
    key: text("key").notNull(),
    payloadHash: text("payload_hash").notNull(),
    runId: text("run_id").notNull(),
    createdAtMs: integer("created_at_ms").notNull(),
  },
  // By age, for the cron tick that deletes keys past IDEMPOTENCY_KEY_TTL_MS (src/retention.ts).
  (t) => [primaryKey({ columns: [t.orgId, t.key] }), index("idempotency_keys_age").on(t.createdAtMs)],
);

// One row: the last cron tick, when the API last recovered from an outage or a deploy (the start of
// a recovery), and how far that recovery's pass over unfinished runs has come (src/recovery.ts).
export const sweep = sqliteTable("sweep", {
  id: integer("id").primaryKey(),
  lastTickAtMs: integer("last_tick_at_ms").notNull(),
  recoveredAtMs: integer("recovered_at_ms").notNull(),
  /** The recovery whose pass finished (equal to recovered_at_ms once dispatch may go on). */
  recoveryDoneAtMs: integer("recovery_done_at_ms").notNull().default(0),
  /** The last run id the pass reconciled; null: from the start. */
  recoveryCursor: text("recovery_cursor"),
  /** The deployed Worker version that ticked last (a new one starts a recovery). */
  versionId: text("version_id"),
});

// A recovery's failed tries of one run (src/recovery.ts): at RECOVERY_RUN_TRIES_MAX the pass records
// the problem on the run and moves on. Rows exist only for runs that failed; a finished pass deletes
// its recovery's rows and any older ones.
export const recoveryTries = sqliteTable(
  "recovery_tries",
  {
    recoveredAtMs: integer("recovered_at_ms").notNull(),
    runId: text("run_id").notNull(),
    tries: integer("tries").notNull(),
  },
  (t) => [primaryKey({ columns: [t.recoveredAtMs, t.runId] })],
);

// Events delivered by the outbox Queue, stored once per (run, seq).
export const events = sqliteTable(
  "events",
  {
    runId: text("run_id").notNull(),
    seq: integer("seq").notNull(),
    orgId: text("org_id").notNull(),
    type: text("type").notNull(),
    data: text("data").notNull(),
    atMs: integer("at_ms").notNull(),
    receivedAtMs: integer("received_at_ms").notNull(),
  },
  (t) => [primaryKey({ columns: [t.runId, t.seq] })],
);

// Ended runs whose D1 events are still stored: the cron tick deletes their events once they ended
// more than EVENT_RETENTION_MS ago, then the row (src/retention.ts). Written with the terminal projection.
export const endedRuns = sqliteTable(
  "ended_runs",
  {
    runId: text("run_id").primaryKey(),
    endedAtMs: integer("ended_at_ms").notNull(),
  },
  (t) => [index("ended_runs_age").on(t.endedAtMs, t.runId)],
);

// Completion callbacks to the URL given at dispatch: one delivery per run, retried independently
// of execution (../shared/spec/build-lifecycle.md, "Events and completion retry independently").
export const callbackDeliveries = sqliteTable(
  "callback_deliveries",
  {
    runId: text("run_id").primaryKey(),
    orgId: text("org_id").notNull(),
    url: text("url").notNull(),
    status: text("status", { enum: ["pending", "delivered", "failed"] }).notNull(),
    attempts: integer("attempts").notNull(),
    lastError: text("last_error"),
    lastStatusCode: integer("last_status_code"),
    lastAttemptAtMs: integer("last_attempt_at_ms"),
    deliveredAtMs: integer("delivered_at_ms"),
    createdAtMs: integer("created_at_ms").notNull(),
  },
  // By status alone too: the cron's delivery sweep reads the pending ones of every organization.
  (t) => [index("callback_deliveries_org").on(t.orgId, t.status), index("callback_deliveries_status").on(t.status)],
);
