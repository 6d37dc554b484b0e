// The SchedulerObject's SQLite schema as it was made before drizzle: versioned steps applied by
// durable-objects/legacy/migrator.ts. Frozen, never edited: they only bring an object made by them
// to their last version, which the first generated migration adopts (durable-objects/store.ts).
// A change is now an edit of durable-objects/scheduler-schema.ts and a generated migration.

import type { MigrationStep } from "./migrator";

export const SCHEDULER_OBJECT_MIGRATIONS: readonly MigrationStep[] = [
  // 1: each autopilot project's gates, the slots its runs hold, and the budget each run reserved.
  (sql) => {
    sql.exec(`CREATE TABLE IF NOT EXISTS project_gates (
      project_id TEXT PRIMARY KEY, enabled INTEGER NOT NULL, draining INTEGER NOT NULL, dispatch_window TEXT,
      concurrency INTEGER, budget_limit_cents INTEGER, budget_per_run_cents INTEGER,
      budget_spent_cents INTEGER NOT NULL DEFAULT 0, budget_reset_at_ms INTEGER, updated_at_ms INTEGER NOT NULL)`);
    sql.exec(`CREATE TABLE IF NOT EXISTS slots (
      run_id TEXT PRIMARY KEY, project_id TEXT NOT NULL, org_id TEXT NOT NULL, taken_at_ms INTEGER NOT NULL, checked_at_ms INTEGER NOT NULL)`);
    sql.exec("CREATE INDEX IF NOT EXISTS slots_project ON slots (project_id, taken_at_ms)");
    sql.exec("CREATE INDEX IF NOT EXISTS slots_checked ON slots (checked_at_ms)");
    // status: held (reserved, run unfinished), settled (cost counted as spent), review (cost above the
    // hold or unknown: still held until an admin resolves it).
    sql.exec(`CREATE TABLE IF NOT EXISTS budget_holds (
      run_id TEXT PRIMARY KEY, project_id TEXT NOT NULL, reserved_cents INTEGER NOT NULL, status TEXT NOT NULL,
      cost_cents INTEGER, created_at_ms INTEGER NOT NULL, updated_at_ms INTEGER NOT NULL)`);
    sql.exec("CREATE INDEX IF NOT EXISTS budget_holds_project ON budget_holds (project_id, status)");
  },
  // 2: a slot belongs to one attempt of its run (../shared/STYLE.md, "Key state by what it belongs
  // to"), so a late release of attempt N never frees the slot taken for attempt N+1. Slots taken
  // before keep attempt 0: any release of their run frees them, as it did then.
  (sql) => {
    sql.exec(`CREATE TABLE slots_by_attempt (
      run_id TEXT NOT NULL, attempt INTEGER NOT NULL, project_id TEXT NOT NULL, org_id TEXT NOT NULL,
      taken_at_ms INTEGER NOT NULL, checked_at_ms INTEGER NOT NULL, PRIMARY KEY (run_id, attempt))`);
    sql.exec(`INSERT INTO slots_by_attempt (run_id, attempt, project_id, org_id, taken_at_ms, checked_at_ms)
      SELECT run_id, 0, project_id, org_id, taken_at_ms, checked_at_ms FROM slots`);
    sql.exec("DROP TABLE slots");
    sql.exec("ALTER TABLE slots_by_attempt RENAME TO slots");
    sql.exec("CREATE INDEX slots_project ON slots (project_id, taken_at_ms)");
    sql.exec("CREATE INDEX slots_checked ON slots (checked_at_ms)");
  },
];
