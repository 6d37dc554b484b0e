// The D1 queue row is a projection of the run object, written only with a newer version
// (../shared/DESIGN.md, "D1 holds the queue and the credit ledger").

import { sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { endedRuns, labelSets, runs } from "../db/schema";
import { labelsKey } from "./labels";
import type { RunRecord } from "./types";

/** Writes the run's queue row; answers with the rows D1 read and wrote (src/lib/cost.ts). */
export async function projectRun(db: D1Database, run: RunRecord): Promise<D1Meta> {
  const row = {
    id: run.id,
    orgId: run.orgId,
    state: run.state,
    attempt: run.attempt,
    version: run.version,
    labelsKey: labelsKey(run.launch.protocol, run.labels),
    protocol: run.launch.protocol,
    orderGroup: run.continuation ? 0 : 1,
    orderPriority: -run.priority,
    queuedAtMs: run.queuedAtMs,
    notBeforeMs: run.notBeforeMs,
    createdAtMs: run.createdAtMs,
    updatedAtMs: run.updatedAtMs,
    projectId: run.projectId ?? null,
  };
  const { id: _id, orgId: _org, createdAtMs: _created, ...changing } = row;
  const orm = drizzle(db);
  const upsert = orm
    .insert(runs)
    .values(row)
    .onConflictDoUpdate({ target: runs.id, set: changing, setWhere: sql`excluded.version > ${runs.version}` });
  const also = alongside(orm, run, row.labelsKey);
  if (also === null) return (await upsert).meta;
  // One batch, the queue row first: a scheduler that removes an emptied label set between them
  // either sees this queued row (and keeps the set) or is followed by this re-insert.
  const results = await orm.batch([upsert, also]);
  return sumMeta(results.map((r) => (r as D1Result).meta));
}

/**
 * The row that goes with the queue row: a queued run's label set (the scheduler reads only sets
 * with queued work), or an ended run's place in the queue of event pruning (src/retention.ts).
 */
function alongside(orm: ReturnType<typeof drizzle>, run: RunRecord, key: string) {
  if (run.state === "queued") {
    return orm.insert(labelSets).values({ orgId: run.orgId, labelsKey: key, createdAtMs: run.updatedAtMs }).onConflictDoNothing();
  }
  if (run.endedAtMs !== null) {
    return orm.insert(endedRuns).values({ runId: run.id, endedAtMs: run.endedAtMs }).onConflictDoNothing();
  }
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
