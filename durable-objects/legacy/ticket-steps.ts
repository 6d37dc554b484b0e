// The TicketObject's SQLite schema as it was made before drizzle: versioned steps applied by
// durable-objects/legacy/migrator.ts. Frozen, never edited: they only bring an object made by them
// to their last version, which the first generated migration adopts (durable-objects/store.ts).
// A change is now an edit of durable-objects/ticket-schema.ts and a generated migration.

import type { MigrationStep } from "./migrator";

export const TICKET_OBJECT_MIGRATIONS: readonly MigrationStep[] = [
  // 1: the ticket's one row (pending_generation: an admission begun and not yet recorded), the
  // webhook deliveries it has seen, and its history.
  (sql) => {
    sql.exec(`CREATE TABLE ticket (
      id INTEGER PRIMARY KEY CHECK (id = 1), ticket_key TEXT NOT NULL, project_id TEXT NOT NULL, org_id TEXT NOT NULL,
      number INTEGER NOT NULL, status TEXT NOT NULL, reasons TEXT NOT NULL, generation TEXT, admitted_generation TEXT,
      pending_generation TEXT, run_id TEXT, updated_at_ms INTEGER NOT NULL)`);
    sql.exec("CREATE TABLE deliveries (delivery_id TEXT PRIMARY KEY, seen_at_ms INTEGER NOT NULL)");
    sql.exec("CREATE TABLE history (seq INTEGER PRIMARY KEY AUTOINCREMENT, entry TEXT NOT NULL)");
  },
  // 2: a lapse recorded before its run is withdrawn: the run, the reason, and the withdrawals tried.
  (sql) => {
    sql.exec("ALTER TABLE ticket ADD COLUMN withdraw_run_id TEXT");
    sql.exec("ALTER TABLE ticket ADD COLUMN withdraw_reason TEXT");
    sql.exec("ALTER TABLE ticket ADD COLUMN withdraw_attempts INTEGER NOT NULL DEFAULT 0");
  },
  // 3: whether this object, named per project, took over the row of the object once named per
  // repository issue (TicketObject.carryOver), and the run it took over with it.
  (sql) => {
    sql.exec("CREATE TABLE carried_over (id INTEGER PRIMARY KEY CHECK (id = 1), at_ms INTEGER NOT NULL, run_id TEXT)");
  },
];
