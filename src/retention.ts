// Bounded storage in D1: the cron tick deletes what has outlived its window, a bounded batch per
// table per tick (PRUNE_BATCH_MAX), so a tick's cost stays flat whatever has piled up; what is left
// waits for the next tick. Idempotency keys past IDEMPOTENCY_KEY_TTL_MS (src/run/idempotency.ts),
// the stored events of runs that ended more than EVENT_RETENTION_MS ago, label sets left with
// no queued run, and dashboard sessions past their idle or absolute expiry.

import { and, asc, eq, exists, inArray, lte, not, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Config } from "./config";
import { pruneSessions } from "./credentials/sessions";
import { endedRuns, events, idempotencyKeys, labelSets, runs } from "./db/schema";
import type { Env } from "./env";
import { runStub } from "./lib/stubs";
import { log, logRun } from "./lib/log";
import { keyExpired } from "./run/idempotency";

export interface PruneCounts {
  idempotency_keys: number;
  events: number;
  ended_runs: number;
  label_sets: number;
  dashboard_sessions: number;
}

/** One tick's pruning. A failure is logged and left to the next tick: it never fails the tick. */
export async function pruneStorage(env: Env, config: Config, nowMs: number): Promise<PruneCounts | null> {
  const db = env.DB;
  try {
    const counts = {
      idempotency_keys: await pruneIdempotencyKeys(db, config, nowMs),
      events: await pruneEvents(db, config, nowMs),
      ended_runs: await forgetEndedRuns(env, config, nowMs),
      label_sets: await pruneLabelSets(db, config),
      dashboard_sessions: await pruneSessions(db, config, nowMs),
    };
    if (Object.values(counts).some((n) => n > 0)) log("retention.pruned", { ...counts, reason: "retention" });
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

/** Deletes up to a batch of stored events of the runs that ended longest ago, past the retention. */
async function pruneEvents(db: D1Database, config: Config, nowMs: number): Promise<number> {
  const orm = drizzle(db);
  const due = orm
    .select({ rowid: sql`${events}.rowid` })
    .from(endedRuns)
    .innerJoin(events, eq(events.runId, endedRuns.runId))
    .where(lte(endedRuns.endedAtMs, nowMs - config.eventRetentionMs))
    .orderBy(asc(endedRuns.endedAtMs), asc(endedRuns.runId))
    .limit(config.pruneBatchMax);
  const result = await orm.delete(events).where(inArray(sql`rowid`, due));
  return result.meta.changes;
}

/**
 * Ended runs past the retention whose D1 events are gone: each run object is asked to prune its
 * outbox too (a backstop for objects whose retention alarm was never armed, such as runs that ended
 * before retention existed), then the run is forgotten. At most PRUNE_RUN_OBJECTS_MAX per tick;
 * a run object that is unreachable or not done yet is asked again at the next tick.
 */
async function forgetEndedRuns(env: Env, config: Config, nowMs: number): Promise<number> {
  const orm = drizzle(env.DB);
  const due = await orm
    .select({ runId: endedRuns.runId, attempt: runs.attempt })
    .from(endedRuns)
    .innerJoin(runs, eq(runs.id, endedRuns.runId))
    .where(and(lte(endedRuns.endedAtMs, nowMs - config.eventRetentionMs), not(exists(orm.select({ one: sql`1` }).from(events).where(eq(events.runId, endedRuns.runId))))))
    .orderBy(asc(endedRuns.endedAtMs), asc(endedRuns.runId))
    .limit(config.pruneRunObjectsMax);
  const done: string[] = [];
  for (const { runId, attempt } of due) {
    try {
      if ((await runStub(env, runId).pruneEvents()).left === 0) done.push(runId);
    } catch (err) {
      logRun("retention.run_prune_failed", { run: runId, attempt, reason: String(err) });
    }
  }
  if (done.length === 0) return 0;
  const forgotten = await orm.delete(endedRuns).where(inArray(endedRuns.runId, done));
  return forgotten.meta.changes;
}

/**
 * Label sets with no queued run, which no claim removed because no runner covers them (their runs
 * were cancelled, say). The same conditional delete as the scheduler's, so a run projected as
 * queued meanwhile keeps or re-adds its set (src/run/projection.ts).
 */
async function pruneLabelSets(db: D1Database, config: Config): Promise<number> {
  const orm = drizzle(db);
  const queued = orm
    .select({ one: sql`1` })
    .from(runs)
    .where(and(eq(runs.orgId, labelSets.orgId), eq(runs.labelsKey, labelSets.labelsKey), eq(runs.state, "queued")));
  const empty = orm.select({ rowid: sql`rowid` }).from(labelSets).where(not(exists(queued))).limit(config.pruneBatchMax);
  const result = await orm.delete(labelSets).where(inArray(sql`rowid`, empty));
  return result.meta.changes;
}
