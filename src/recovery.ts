// Recovery after an outage or a deploy (../shared/spec/run-lifecycle.md, "Completion and recovery":
// "After a restart, reconcile unfinished runs before dispatch ... Persist the observed recovery
// result"). The sweep starts a recovery (src/sweep.ts: a gap between ticks, or a new Worker
// version). Its pass walks the unfinished runs that execute or may continue (claimed, implementing,
// pausing, paused, publishing) in id order, a bounded batch per call, and asks each run object to
// reconcile itself (RunObject.recover: publications against the code host and the branch, paused
// runs against their stored checkpoint, running attempts against their runner's reports). Until the
// pass reaches the end, claims are refused with 503 recovering (src/recovery-hold.ts), for at most
// RECOVERY_HOLD_MAX_MS; a claim that finds one under way moves the pass on itself (claimKick), so
// dispatch does not wait for the next cron tick. A run whose reconciliation keeps failing is tried
// RECOVERY_RUN_TRIES_MAX times, then passed over with the problem recorded on it (its
// recovery_failure, its "observed recovery result"), so the runs after it are still reconciled and
// dispatch is held no longer than the pass.

import type { Config } from "./config";
import type { Env } from "./env";
import { log, logRun } from "./lib/log";
import { tickSweep } from "./sweep";

/** The states whose runs a recovery reconciles (queued ones are the queue's: nothing ran). */
const RECOVERED_STATES = "'claimed', 'implementing', 'pausing', 'paused', 'publishing'";

export interface PassResult {
  /** The recovery the pass belongs to (its start); 0 when none is under way. */
  epochMs: number;
  checked: number;
  /** Runs that could not be reconciled and hold the pass: each is tried again at the next step. */
  failed: number;
  /** Runs passed over after RECOVERY_RUN_TRIES_MAX failed tries, their problem recorded on them. */
  abandoned: number;
  done: boolean;
}

/** The most of an error a run's recovery_failure keeps (an error is the run object's, not a tenant's). */
const RECOVERY_ERROR_CHARS = 500;

/** One bounded step of the recovery under way, if any (the cron tick's and a held claim's). */
export async function recoveryPass(env: Env, config: Config): Promise<PassResult> {
  const row = await env.DB.prepare("SELECT recovered_at_ms, recovery_done_at_ms, recovery_cursor FROM sweep WHERE id = 1").first<{
    recovered_at_ms: number;
    recovery_done_at_ms: number;
    recovery_cursor: string | null;
  }>();
  if (!row || row.recovered_at_ms <= row.recovery_done_at_ms) return { epochMs: 0, checked: 0, failed: 0, abandoned: 0, done: true };
  const epochMs = row.recovered_at_ms;
  const { results } = await env.DB.prepare(`SELECT id, attempt FROM runs WHERE state IN (${RECOVERED_STATES}) AND id > ? ORDER BY id LIMIT ?`)
    .bind(row.recovery_cursor ?? "", config.recoveryBatch)
    .all<{ id: string; attempt: number }>();
  // The cursor stops before the first run that could not be reconciled: the next step tries it again,
  // until its tries reach RECOVERY_RUN_TRIES_MAX and it is passed over (one run never pins the pass).
  let cursor = row.recovery_cursor;
  let failed = 0;
  let abandoned = 0;
  for (const run of results) {
    const outcome = await reconcileRun(env, config, run, epochMs);
    if (outcome === "failed") failed += 1;
    if (outcome === "abandoned") abandoned += 1;
    if (failed === 0) cursor = run.id;
  }
  const done = failed === 0 && results.length < config.recoveryBatch;
  // Conditional on the recovery still being this one: a newer one started meanwhile walks from its own start.
  if (done) {
    await env.DB.batch([
      env.DB.prepare("UPDATE sweep SET recovery_done_at_ms = ?1, recovery_cursor = NULL WHERE id = 1 AND recovered_at_ms = ?1").bind(epochMs),
      env.DB.prepare("DELETE FROM recovery_tries WHERE recovered_at_ms <= ?").bind(epochMs),
    ]);
    log("recovery.done", { recovered_at_ms: epochMs, checked: results.length, abandoned, reason: "every unfinished run was reconciled or passed over: dispatch goes on" });
  } else if (cursor !== row.recovery_cursor) {
    await env.DB.prepare("UPDATE sweep SET recovery_cursor = ?2 WHERE id = 1 AND recovered_at_ms = ?1 AND (recovery_cursor IS NULL OR recovery_cursor < ?2)")
      .bind(epochMs, cursor)
      .run();
  }
  if (!done) log("recovery.progress", { recovered_at_ms: epochMs, checked: results.length, failed, abandoned, cursor, reason: "the pass goes on at the next step" });
  return { epochMs, checked: results.length, failed, abandoned, done };
}

/**
 * Asks one run object to reconcile itself. A failure counts a try of the run in this recovery
 * (recovery_tries); at RECOVERY_RUN_TRIES_MAX the run is passed over with its problem recorded.
 */
async function reconcileRun(env: Env, config: Config, run: { id: string; attempt: number }, epochMs: number): Promise<"reconciled" | "failed" | "abandoned"> {
  const stub = env.RUN.get(env.RUN.idFromName(run.id));
  try {
    const answer = await stub.recover(epochMs);
    logRun("run.recovered", { run: run.id, attempt: run.attempt, state: answer.state, reason: answer.problem ?? answer.observed });
    return "reconciled";
  } catch (err) {
    const tries = await countFailedTry(env.DB, epochMs, run.id);
    const error = String(err).slice(0, RECOVERY_ERROR_CHARS);
    if (tries < config.recoveryRunTriesMax) {
      logRun("run.recover_failed", { run: run.id, attempt: run.attempt, tries, reason: error });
      return "failed";
    }
    // Best effort: a run object that cannot even record it is still passed over, and the line says so.
    const recorded = await stub.recoveryFailed(epochMs, tries, error).then(
      () => true,
      () => false,
    );
    logRun("run.recover_abandoned", { run: run.id, attempt: run.attempt, tries, recorded, reason: `passed over after ${tries} failed tries: ${error}` });
    return "abandoned";
  }
}

/** One more failed try of `runId` in the recovery `epochMs`: how many it has had now. */
async function countFailedTry(db: D1Database, epochMs: number, runId: string): Promise<number> {
  const row = await db
    .prepare("INSERT INTO recovery_tries (recovered_at_ms, run_id, tries) VALUES (?1, ?2, 1) ON CONFLICT (recovered_at_ms, run_id) DO UPDATE SET tries = tries + 1 RETURNING tries")
    .bind(epochMs, runId)
    .first<{ tries: number }>();
  return row?.tries ?? 1;
}

/** Whether this isolate has a kick under way (its promise stays with the request that started it). */
let kicking = false;

/**
 * A held claim moves recovery on: the tick the cron has not made yet (which starts the recovery
 * after an outage), then one step of the pass. Bounded like both; one at a time per isolate, and
 * never shared: a request must not wait on another request's I/O.
 */
export async function claimKick(env: Env, config: Config): Promise<void> {
  if (kicking) return;
  kicking = true;
  try {
    await tickSweep(env.DB, config, Date.now(), env.CF_VERSION_METADATA?.id ?? null);
    await recoveryPass(env, config);
  } catch (err) {
    log("recovery.kick_failed", { reason: String(err) });
  } finally {
    kicking = false;
  }
}
