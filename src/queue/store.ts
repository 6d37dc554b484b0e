// The one statement that stores a run event in D1, for the outbox consumer and for the run object
// that stores a claim's events itself (durable-objects/outbox.ts, split()).

import type { OutboxMessage } from "../env";

/** Stores an event once: a redelivery of its (run, seq) changes nothing. */
const INSERT_EVENT_SQL = `INSERT INTO events (run_id, seq, org_id, type, data, at_ms, received_at_ms)
  VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, seq) DO NOTHING`;

export function insertEvent(db: D1Database, event: OutboxMessage): D1PreparedStatement {
  return db.prepare(INSERT_EVENT_SQL).bind(event.run_id, event.seq, event.org_id, event.type, JSON.stringify(event.data), event.at_ms, Date.now());
}
