// The RunObject's SQLite schema as it was made before drizzle: versioned steps applied by
// durable-objects/legacy/migrator.ts. Frozen, never edited: they only bring an object made by them
// to their last version, which the first generated migration adopts (durable-objects/store.ts).
// A change is now an edit of durable-objects/run-schema.ts and a generated migration.
// Version 1 is the schema every run object had before versions were recorded: IF NOT EXISTS lets
// objects that already held those tables take it as is.

import type { MigrationStep } from "./migrator";

export const RUN_OBJECT_MIGRATIONS: readonly MigrationStep[] = [
  // 1: the run row, attempt tokens, the event outbox and the patch chunks.
  (sql) => {
    sql.exec(`CREATE TABLE IF NOT EXISTS run (
      id TEXT PRIMARY KEY, state TEXT NOT NULL, attempt INTEGER NOT NULL, version INTEGER NOT NULL,
      doc TEXT NOT NULL, projected_version INTEGER NOT NULL DEFAULT 0)`);
    sql.exec(`CREATE TABLE IF NOT EXISTS attempt_tokens (
      attempt INTEGER PRIMARY KEY, machine_id TEXT NOT NULL, token_hash TEXT NOT NULL UNIQUE)`);
    sql.exec(`CREATE TABLE IF NOT EXISTS outbox (
      seq INTEGER PRIMARY KEY, type TEXT NOT NULL, data TEXT NOT NULL, at_ms INTEGER NOT NULL,
      sent_at_ms INTEGER, attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at_ms INTEGER NOT NULL,
      last_error TEXT)`);
    sql.exec(`CREATE TABLE IF NOT EXISTS artifact_chunks (
      attempt INTEGER NOT NULL, idx INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (attempt, idx))`);
  },
  // 2: the latest checkpoint's patch and session text (durable-objects/checkpoint-store.ts).
  (sql) => {
    sql.exec(`CREATE TABLE IF NOT EXISTS checkpoint_chunks (
      part TEXT NOT NULL, idx INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (part, idx))`);
  },
  // 3: events a claim recorded as sent before it sent them (durable-objects/outbox.ts, markSending).
  (sql) => {
    sql.exec("ALTER TABLE outbox ADD COLUMN unconfirmed INTEGER NOT NULL DEFAULT 0");
  },
  // 4: the last attempt whose autopilot slot the scheduler was told to give back (releaseSlot), so
  // a new instance after an eviction does not tell it again.
  (sql) => {
    sql.exec("ALTER TABLE run ADD COLUMN slot_released_attempt INTEGER NOT NULL DEFAULT 0");
  },
];
