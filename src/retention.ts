// Bounded storage in D1: the cron tick deletes what has outlived its window, a bounded batch per
// table per tick (PRUNE_BATCH_MAX), so a tick's cost stays flat whatever has piled up; what is left
// waits for the next tick. Idempotency keys past IDEMPOTENCY_KEY_TTL_MS (src/run/idempotency.ts),
// the stored events of runs that ended more than EVENT_RETENTION_MS ago, and label sets left with
// no queued run.

import { asc, inArray, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Config } from "./config";
import { idempotencyKeys } from "./db/schema";
import { log } from "./lib/log";
import { keyExpired } from "./run/idempotency";

export interface PruneCounts {
  idempotency_keys: number;
  events: number;
  ended_runs: number;
  label_sets: number;
}

/** One tick's pruning. A failure is logged and left to the next tick: it never fails the tick. */
export async function pruneStorage(db: D1Database, config: Config, nowMs: number): Promise<PruneCounts | null> {
  try {
    const counts = {
      idempotency_keys: await pruneIdempotencyKeys(db, config, nowMs),
      ...(await pruneEvents(db, config, nowMs)),
      label_sets: await pruneLabelSets(db, config),
    };
    if (counts.idempotency_keys + counts.events + counts.ended_runs + counts.label_sets > 0) log("retention.pruned", { ...counts, reason: "retention" });
    return counts;
  } catch (err) {
    log("retention.prune_failed", { reason: String(err) });
    return null;
  }
}

/** Deletes up to a batch of the oldest expired keys. */
async function pruneIdempotencyKeys(db: D1Database, config: Config, nowMs: number): Promise<number> {
  const orm = drizzle(db);
  const oldest = orm
    .select({ rowid: sql`rowid` })
    .from(idempotencyKeys)
    .where(keyExpired(nowMs - config.idempotencyKeyTtlMs))
    .orderBy(asc(idempotencyKeys.createdAtMs))
    .limit(config.pruneBatchMax);
  const result = await orm.delete(idempotencyKeys).where(inArray(sql`rowid`, oldest));
  return result.meta.changes;
}

/**
 * Deletes up to a batch of stored events of the runs that ended longest ago (past the retention),
 * then forgets the ended runs left with no events. Runs are taken oldest first, so the ones already
 * emptied sit at the front of ended_runs_age and cost one index step each.
 */
async function pruneEvents(db: D1Database, config: Config, nowMs: number): Promise<{ events: number; ended_runs: number }> {
  const cutoffMs = nowMs - config.eventRetentionMs;
  const batch = config.pruneBatchMax;
  const [deletedEvents, deletedRuns] = await db.batch([
    db.prepare(PRUNE_EVENTS_SQL).bind(cutoffMs, batch),
    db.prepare(FORGET_ENDED_RUNS_SQL).bind(cutoffMs, batch),
  ]);
  return { events: deletedEvents.meta.changes, ended_runs: deletedRuns.meta.changes };
}

const PRUNE_EVENTS_SQL = `DELETE FROM events WHERE rowid IN (
  SELECT e.rowid FROM ended_runs d JOIN events e ON e.run_id = d.run_id
  WHERE d.ended_at_ms <= ?1 ORDER BY d.ended_at_ms, d.run_id LIMIT ?2)`;

const FORGET_ENDED_RUNS_SQL = `DELETE FROM ended_runs WHERE run_id IN (
  SELECT d.run_id FROM ended_runs d
  WHERE d.ended_at_ms <= ?1 AND NOT EXISTS (SELECT 1 FROM events e WHERE e.run_id = d.run_id)
  ORDER BY d.ended_at_ms, d.run_id LIMIT ?2)`;

/**
 * Label sets with no queued run, which no claim removed because no runner covers them (their runs
 * were cancelled, say). The same conditional delete as the scheduler's, so a run projected as
 * queued meanwhile keeps or re-adds its set (src/run/projection.ts).
 */
async function pruneLabelSets(db: D1Database, config: Config): Promise<number> {
  const result = await db.prepare(PRUNE_LABEL_SETS_SQL).bind(config.pruneBatchMax).run();
  return result.meta.changes;
}

const PRUNE_LABEL_SETS_SQL = `DELETE FROM label_sets WHERE rowid IN (
  SELECT s.rowid FROM label_sets s
  WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.org_id = s.org_id AND r.labels_key = s.labels_key AND r.state = 'queued')
  LIMIT ?1)`;
