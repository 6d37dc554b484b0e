// The D1 queue row is a projection of the run object, written only with a newer version
// (../shared/DESIGN.md, "D1 holds the queue and the credit ledger"). The statements are fixed SQL
// text over the columns of src/db/schema.ts (`runs`, `label_sets`, `ended_runs`): every claim and
// report writes one, so no query is built per call (docs/BENCHMARKS.md, "What a claim costs").

import { labelsKey } from "./labels";
import type { RunRecord } from "./types";

const UPSERT_RUN_SQL = `INSERT INTO runs (id, org_id, state, attempt, version, labels_key, protocol, order_group,
    order_priority, queued_at_ms, not_before_ms, created_at_ms, updated_at_ms, project_id)
  VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
  ON CONFLICT (id) DO UPDATE SET state = excluded.state, attempt = excluded.attempt, version = excluded.version,
    labels_key = excluded.labels_key, protocol = excluded.protocol, order_group = excluded.order_group,
    order_priority = excluded.order_priority, queued_at_ms = excluded.queued_at_ms, not_before_ms = excluded.not_before_ms,
    updated_at_ms = excluded.updated_at_ms, project_id = excluded.project_id
  WHERE excluded.version > runs.version`;

const LABEL_SET_SQL = "INSERT INTO label_sets (org_id, labels_key, created_at_ms) VALUES (?, ?, ?) ON CONFLICT DO NOTHING";
const ENDED_RUN_SQL = "INSERT INTO ended_runs (run_id, ended_at_ms) VALUES (?, ?) ON CONFLICT DO NOTHING";

/**
 * Writes the run's queue row, with `also` in the same D1 batch (a claim's events,
 * durable-objects/outbox.ts); answers with the rows D1 read and wrote (src/lib/cost.ts).
 */
export async function projectRun(db: D1Database, run: RunRecord, also: D1PreparedStatement[] = []): Promise<D1Meta> {
  const key = labelsKey(run.launch.protocol, run.labels);
  const upsert = db
    .prepare(UPSERT_RUN_SQL)
    .bind(
      run.id,
      run.orgId,
      run.state,
      run.attempt,
      run.version,
      key,
      run.launch.protocol,
      run.continuation ? 0 : 1,
      -run.priority,
      run.queuedAtMs,
      run.notBeforeMs,
      run.createdAtMs,
      run.updatedAtMs,
      run.projectId ?? null,
    );
  const row = alongside(db, run, key);
  const statements = row === null ? [upsert, ...also] : [upsert, row, ...also];
  if (statements.length === 1) return (await upsert.run()).meta;
  // One batch, the queue row first: a scheduler that removes an emptied label set between them
  // either sees this queued row (and keeps the set) or is followed by this re-insert.
  const results = await db.batch(statements);
  return sumMeta(results.map((r) => r.meta));
}

/**
 * The row that goes with the queue row: a queued run's label set (the scheduler reads only sets
 * with queued work), or an ended run's place in the queue of event pruning (src/retention.ts).
 */
function alongside(db: D1Database, run: RunRecord, key: string): D1PreparedStatement | null {
  if (run.state === "queued") return db.prepare(LABEL_SET_SQL).bind(run.orgId, key, run.updatedAtMs);
  if (run.endedAtMs !== null) return db.prepare(ENDED_RUN_SQL).bind(run.id, run.endedAtMs);
  return null;
}

function sumMeta(metas: D1Meta[]): D1Meta {
  const total = { ...metas[0] };
  for (const m of metas.slice(1)) {
    total.rows_read += m.rows_read;
    total.rows_written += m.rows_written;
  }
  return total;
}
