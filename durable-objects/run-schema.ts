// The RunObject's SQLite (durable-objects/run/core.ts and the stores beside it read and write it):
// the run row, attempt tokens, the event outbox and the patch and checkpoint chunks. A change is an
// edit here plus the migration `npm run db:generate` makes in durable-objects/drizzle/run/. Keys are
// the column names. Objects made before these migrations took the frozen steps of
// durable-objects/legacy/run-steps.ts, whose last version the first migration adopts
// (durable-objects/store.ts).

import { integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

/** The one run: its compare-and-swap columns, the whole record as JSON (doc), and two marks of side effects done. */
export const runTable = sqliteTable("run", {
  id: text("id").primaryKey(),
  state: text("state").notNull(),
  attempt: integer("attempt").notNull(),
  version: integer("version").notNull(),
  doc: text("doc").notNull(),
  // The version of the run the D1 queue row was last written at.
  projected_version: integer("projected_version").notNull().default(0),
  // The last attempt whose autopilot slot the scheduler was told to give back (run/pending.ts).
  slot_released_attempt: integer("slot_released_attempt").notNull().default(0),
});

/** The hash of each attempt's run-attempt token, and the machine it was issued to. */
export const attemptTokens = sqliteTable("attempt_tokens", {
  attempt: integer("attempt").primaryKey(),
  machine_id: text("machine_id").notNull(),
  token_hash: text("token_hash").notNull().unique(),
});

/** The run's events, by per-run sequence number, and their publication to the Queue (durable-objects/outbox.ts). */
export const outboxEvents = sqliteTable("outbox", {
  seq: integer("seq").primaryKey(),
  type: text("type").notNull(),
  data: text("data").notNull(),
  at_ms: integer("at_ms").notNull(),
  sent_at_ms: integer("sent_at_ms"),
  attempts: integer("attempts").notNull().default(0),
  next_attempt_at_ms: integer("next_attempt_at_ms").notNull(),
  last_error: text("last_error"),
  // Recorded as sent by a claim before it was sent (Outbox.markSending): 1 until confirmed.
  unconfirmed: integer("unconfirmed").notNull().default(0),
});

/** A reported patch, in chunks under the 2 MB row limit (durable-objects/artifact-store.ts). */
export const artifactChunks = sqliteTable(
  "artifact_chunks",
  {
    attempt: integer("attempt").notNull(),
    idx: integer("idx").notNull(),
    data: text("data").notNull(),
  },
  (t) => [primaryKey({ columns: [t.attempt, t.idx] })],
);

/** The latest checkpoint's patch and session text, in chunks (durable-objects/checkpoint-store.ts). */
export const checkpointChunks = sqliteTable(
  "checkpoint_chunks",
  {
    part: text("part").notNull(),
    idx: integer("idx").notNull(),
    data: text("data").notNull(),
  },
  (t) => [primaryKey({ columns: [t.part, t.idx] })],
);
