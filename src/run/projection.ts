// The D1 queue row is a projection of the run object, written only with a newer version
// (../shared/DESIGN.md, "D1 holds the queue and the credit ledger").

import { sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { runs } from "../db/schema";
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
  };
  const { id: _id, orgId: _org, createdAtMs: _created, ...changing } = row;
  const result = await drizzle(db)
    .insert(runs)
    .values(row)
    .onConflictDoUpdate({ target: runs.id, set: changing, setWhere: sql`excluded.version > ${runs.version}` });
  return result.meta;
}
