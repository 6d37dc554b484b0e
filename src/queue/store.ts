// The one statement that stores a run event in D1, for the outbox consumer and for the run object
// that stores a claim's events itself (durable-objects/outbox.ts, split()).

import { getTableColumns } from "drizzle-orm";
import { events } from "../db/schema";
import { fixedStatement, placeholders, textOnly } from "../db/fixed-statement";
import type { OutboxMessage } from "../env";

/** Stores an event once: a redelivery of its (run, seq) changes nothing. A claim stores one (src/db/fixed-statement.ts). */
const INSERT_EVENT = fixedStatement<typeof events.$inferInsert>(
  textOnly.insert(events).values(placeholders(getTableColumns(events))).onConflictDoNothing({ target: [events.runId, events.seq] }),
);

export function insertEvent(db: D1Database, event: OutboxMessage): D1PreparedStatement {
  const row = { runId: event.run_id, seq: event.seq, orgId: event.org_id, type: event.type, data: JSON.stringify(event.data), atMs: event.at_ms, receivedAtMs: Date.now() };
  return INSERT_EVENT.bind(db, row);
}
