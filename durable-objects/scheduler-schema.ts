// The SchedulerObject's SQLite (durable-objects/scheduler-gates.ts reads and writes it): each
// autopilot project's gates, the slots its runs' attempts hold, and the budget each run reserved. A
// change is an edit here plus the migration `npm run db:generate` makes in
// durable-objects/drizzle/scheduler/. Keys are the column names. Objects made before these
// migrations took the frozen steps of durable-objects/legacy/scheduler-steps.ts, whose last version
// the first migration adopts (durable-objects/store.ts).

import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

export const projectGates = sqliteTable("project_gates", {
  project_id: text("project_id").primaryKey(),
  enabled: integer("enabled").notNull(),
  draining: integer("draining").notNull(),
  dispatch_window: text("dispatch_window"),
  concurrency: integer("concurrency"),
  budget_limit_cents: integer("budget_limit_cents"),
  budget_per_run_cents: integer("budget_per_run_cents"),
  budget_spent_cents: integer("budget_spent_cents").notNull().default(0),
  budget_reset_at_ms: integer("budget_reset_at_ms"),
  updated_at_ms: integer("updated_at_ms").notNull(),
});

// A slot belongs to one attempt of its run (../shared/STYLE.md, "Key state by what it belongs to"),
// so a late release of attempt N never frees the slot taken for attempt N+1. Slots taken before
// slots were per attempt keep attempt 0: any release of their run frees them.
export const slots = sqliteTable(
  "slots",
  {
    run_id: text("run_id").notNull(),
    attempt: integer("attempt").notNull(),
    project_id: text("project_id").notNull(),
    org_id: text("org_id").notNull(),
    taken_at_ms: integer("taken_at_ms").notNull(),
    checked_at_ms: integer("checked_at_ms").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.run_id, t.attempt] }),
    index("slots_project").on(t.project_id, t.taken_at_ms),
    index("slots_checked").on(t.checked_at_ms),
  ],
);

// status: held (reserved, run unfinished), settled (cost counted as spent), review (cost above the
// hold or unknown: still held until an admin resolves it).
export const budgetHolds = sqliteTable(
  "budget_holds",
  {
    run_id: text("run_id").primaryKey(),
    project_id: text("project_id").notNull(),
    reserved_cents: integer("reserved_cents").notNull(),
    status: text("status").notNull(),
    cost_cents: integer("cost_cents"),
    created_at_ms: integer("created_at_ms").notNull(),
    updated_at_ms: integer("updated_at_ms").notNull(),
  },
  (t) => [index("budget_holds_project").on(t.project_id, t.status)],
);
