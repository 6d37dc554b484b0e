// How long an Idempotency-Key of POST /v1/runs holds (IDEMPOTENCY_KEY_TTL_MS, docs/protocol.md,
// "Idempotency"): within the window the same key replays its run; after it the key is free, so the
// same key creates a new run, and the cron tick deletes the old row (src/retention.ts). A key that
// names a build job whose dispatch is still unconfirmed never expires: the job's retries under that
// key must find its one run, however long they take (docs/runbook.md).

import { sql, type SQL } from "drizzle-orm";
import { idempotencyKeys } from "../db/schema";

/** True (in SQL) for a stored key created at or before `cutoffMs` that no unconfirmed build job needs. */
export function keyExpired(cutoffMs: number): SQL {
  return sql`${idempotencyKeys.createdAtMs} <= ${cutoffMs} AND NOT EXISTS (SELECT 1 FROM build_jobs
    WHERE build_jobs.org_id = ${idempotencyKeys.orgId} AND build_jobs.id = ${idempotencyKeys.key} AND build_jobs.status = 'dispatch_unconfirmed')`;
}
