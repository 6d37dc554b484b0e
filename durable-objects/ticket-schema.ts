// The TicketObject's SQLite (durable-objects/ticket-store.ts reads and writes it): its one row, the
// webhook deliveries it has seen and its history. A change is an edit here plus the migration
// `npm run db:generate` makes in durable-objects/drizzle/ticket/. Keys are the column names, as the
// ticket's modules read its row. Objects made before these migrations took the frozen steps of
// durable-objects/legacy/ticket-steps.ts, whose last version the first migration adopts
// (durable-objects/store.ts).

import { sql } from "drizzle-orm";
import { check, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";
import type { GitHubFailure } from "../src/autopilot/github/errors";
import type { AdmissionDoor, TicketStatus } from "../src/autopilot/ticket-types";

export const ticket = sqliteTable(
  "ticket",
  {
    id: integer("id").primaryKey(),
    ticket_key: text("ticket_key").notNull(),
    project_id: text("project_id").notNull(),
    org_id: text("org_id").notNull(),
    number: integer("number").notNull(),
    status: text("status").$type<TicketStatus>().notNull(),
    reasons: text("reasons").notNull(),
    generation: text("generation"),
    admitted_generation: text("admitted_generation"),
    // An admission begun and not yet recorded.
    pending_generation: text("pending_generation"),
    run_id: text("run_id"),
    updated_at_ms: integer("updated_at_ms").notNull(),
    // A lapse recorded before its run is withdrawn: the run, the reason, and the withdrawals tried.
    withdraw_run_id: text("withdraw_run_id"),
    withdraw_reason: text("withdraw_reason"),
    withdraw_attempts: integer("withdraw_attempts").notNull().default(0),
  },
  (t) => [check("ticket_one_row", sql`${t.id} = 1`)],
);

// The last time a door could not read (or admit) this ticket's issue, and why; a row of its own,
// so that an issue never read yet keeps it too. The next observation that read the issue deletes it.
export const lastError = sqliteTable(
  "last_error",
  {
    id: integer("id").primaryKey(),
    at_ms: integer("at_ms").notNull(),
    door: text("door").$type<AdmissionDoor>().notNull(),
    failure: text("failure").$type<GitHubFailure | "error">().notNull(),
    message: text("message").notNull(),
  },
  (t) => [check("last_error_one_row", sql`${t.id} = 1`)],
);

export const deliveries = sqliteTable("deliveries", {
  delivery_id: text("delivery_id").primaryKey(),
  seen_at_ms: integer("seen_at_ms").notNull(),
});

export const history = sqliteTable("history", {
  seq: integer("seq").primaryKey({ autoIncrement: true }),
  entry: text("entry").notNull(),
});

// Whether this object, named per project, took over the row of the object once named per
// repository issue (durable-objects/ticket-carry-over.ts), and the run it took over with it.
export const carriedOver = sqliteTable(
  "carried_over",
  {
    id: integer("id").primaryKey(),
    at_ms: integer("at_ms").notNull(),
    run_id: text("run_id"),
  },
  (t) => [check("carried_over_one_row", sql`${t.id} = 1`)],
);
