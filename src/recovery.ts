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

import { and, asc, eq, gt, inArray, isNull, lt, lte, or, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Config } from "./config";
import { recoveryTries, runs, sweep } from "./db/schema";
import type { Env } from "./env";
import { log, logRun } from "./lib/log";
import { tickSweep } from "./sweep";

/** The states whose runs a recovery reconciles (queued ones are the queue's: nothing ran). */
const RECOVERED_STATES = ["claimed", "implementing", "pausing", "paused", "publishing"];

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
  const orm = drizzle(env.DB);
  const row = await orm
    .select({ recoveredAtMs: sweep.recoveredAtMs, recoveryDoneAtMs: sweep.recoveryDoneAtMs, recoveryCursor: sweep.recoveryCursor })
    .from(sweep)
    .where(eq(sweep.id, 1))
    .get();
  if (!row || row.recoveredAtMs <= row.recoveryDoneAtMs) return { epochMs: 0, checked: 0, failed: 0, abandoned: 0, done: true };
  const epochMs = row.recoveredAtMs;
  const results = await orm
    .select({ id: runs.id, attempt: runs.attempt })
    .from(runs)
    .where(and(inArray(runs.state, RECOVERED_STATES), gt(runs.id, row.recoveryCursor ?? "")))
    .orderBy(asc(runs.id))
    .limit(config.recoveryBatch);
  // The cursor stops before the first run that could not be reconciled: the next step tries it again,
  // until its tries reach RECOVERY_RUN_TRIES_MAX and it is passed over (one run never pins the pass).
  let cursor = row.recoveryCursor;
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
  const thisRecovery = and(eq(sweep.id, 1), eq(sweep.recoveredAtMs, epochMs));
  if (done) {
    await orm.batch([
      orm.update(sweep).set({ recoveryDoneAtMs: epochMs, recoveryCursor: null }).where(thisRecovery),
      orm.delete(recoveryTries).where(lte(recoveryTries.recoveredAtMs, epochMs)),
    ]);
    log("recovery.done", { recovered_at_ms: epochMs, checked: results.length, abandoned, reason: "every unfinished run was reconciled or passed over: dispatch goes on" });
  } else if (cursor !== null && cursor !== row.recoveryCursor) {
    await orm
      .update(sweep)
      .set({ recoveryCursor: cursor })
      .where(and(thisRecovery, or(isNull(sweep.recoveryCursor), lt(sweep.recoveryCursor, cursor))));
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
  const [row] = await drizzle(db)
    .insert(recoveryTries)
    .values({ recoveredAtMs: epochMs, runId, tries: 1 })
    .onConflictDoUpdate({ target: [recoveryTries.recoveredAtMs, recoveryTries.runId], set: { tries: sql`${recoveryTries.tries} + 1` } })
    .returning({ tries: recoveryTries.tries });
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
