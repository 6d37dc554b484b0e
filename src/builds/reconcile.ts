// Reconciling build jobs with what the run engine knows: one job on request, the completion
// callback, and the cron's bounded sweeps (../shared/spec/build-lifecycle.md, "Recover without
// duplicating spend").

import { and, asc, eq, inArray, lte } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Config } from "../config";
import { buildJobs } from "../db/ledger-schema";
import { runs } from "../db/schema";
import type { Env } from "../env";
import { DocketError } from "../errors";
import { log } from "../lib/log";
import { isTerminal, TERMINAL_STATES } from "../run/states";
import { attemptDispatch, confirm, UNCONFIRMED_MESSAGE } from "./confirm";
import type { JobRow } from "./payload";
import { releaseUnconfirmed } from "./reserve";
import { findJobRun, settleFromRun } from "./settle";
import { OPEN_JOB_STATUSES } from "./states";
import { runIdForKey } from "./store";

export type ReconcileOutcome = "dispatched" | "released" | "unconfirmed" | "in_progress" | "settled" | "held";

/**
 * Reconciles a job from what the run engine knows (build-lifecycle.md, "Recover without
 * duplicating spend"). An unconfirmed dispatch ends in exactly one of dispatched (a run exists, or
 * a retry under the same key created it) or released (no run exists and `release` was asked after
 * the dispatch timeout). A queued job whose run ended is settled from the run's stored outcome:
 * completion is retried without re-running execution.
 */
export async function reconcileJob(
  env: Env,
  config: Config,
  job: JobRow,
  input: { action: "dispatch" | "release"; actor: string },
): Promise<{ job: JobRow; outcome: ReconcileOutcome; message: string }> {
  if (job.status === "dispatch_unconfirmed") return reconcileUnconfirmed(env, config, job, input);
  if (job.status === "queued") {
    const run = await findJobRun(env, job, async () => null);
    if (run && isTerminal(run.state)) {
      const after = await settleFromRun(env, job, run);
      return { job: after, outcome: after.status === "settled" ? "settled" : "held", message: `run ${run.id} is ${run.state}; the job is ${after.status}` };
    }
    return { job, outcome: "in_progress", message: run ? `run ${run.id} is ${run.state}` : "the run could not be read" };
  }
  const outcome: ReconcileOutcome = job.status === "released" ? "released" : job.status === "settled" ? "settled" : "held";
  const message = outcome === "held"
    ? `the job waits for an admin's resolution (${job.status}), which reconciling cannot give: POST /v1/build-jobs/:id/resolve with its cost`
    : `the job is ${job.status} already; nothing to reconcile`;
  return { job, outcome, message };
}

/** An unconfirmed dispatch: confirmed when its run exists, else released (when asked, after the timeout) or retried. */
async function reconcileUnconfirmed(
  env: Env,
  config: Config,
  job: JobRow,
  input: { action: "dispatch" | "release"; actor: string },
): Promise<{ job: JobRow; outcome: ReconcileOutcome; message: string }> {
  let run;
  try {
    run = await findJobRun(env, job, () => runIdForKey(env.DB, job.orgId, job.id));
  } catch (err) {
    return { job, outcome: "unconfirmed", message: `the run engine could not be asked (${String(err)}); the reservation stays held` };
  }
  if (run) {
    let after = await confirm(env, job, run.id);
    if (isTerminal(run.state)) after = await settleFromRun(env, after, run);
    return { job: after, outcome: "dispatched", message: `the dispatch had been accepted: run ${run.id}` };
  }
  if (input.action === "release") {
    const quietMs = config.buildDispatchTimeoutMs;
    const after = await releaseUnconfirmed(env, job, input.actor, "reconciled: no run was created", quietMs);
    if (after.status === "released") return { job: after, outcome: "released", message: "no run was created; the reservation was released" };
    if (after.status === "dispatch_unconfirmed") {
      throw new DocketError("dispatch_in_flight", `a dispatch of this job was attempted less than ${quietMs} ms ago; try again later`, {
        retry_after_ms: Math.max(0, after.dispatchAttemptedAtMs + quietMs - Date.now()),
      });
    }
    return { job: after, outcome: after.status === "queued" ? "dispatched" : "settled", message: `the job is ${after.status}` };
  }
  const attempt = await attemptDispatch(env, job, false);
  if (attempt.confirmed) {
    return { job: attempt.job, outcome: attempt.job.status === "released" ? "released" : "dispatched", message: `dispatched: run ${attempt.job.runId}` };
  }
  return { job: attempt.job, outcome: "unconfirmed", message: UNCONFIRMED_MESSAGE };
}

/**
 * The completion callback (the exact URL in the dispatch payload). Its body is not trusted: the run
 * object is the authority for outcome, cost and artifact, so a replayed, forged or reordered
 * callback settles at most once and never changes a settled job.
 */
export async function completeByCallback(env: Env, callbackToken: string): Promise<JobRow> {
  const job = await drizzle(env.DB).select().from(buildJobs).where(eq(buildJobs.callbackToken, callbackToken)).get();
  if (!job) throw new DocketError("not_found", "no such completion callback");
  if (!OPEN_JOB_STATUSES.includes(job.status as never)) return job;
  const run = await findJobRun(env, job, () => runIdForKey(env.DB, job.orgId, job.id));
  if (!run) return job;
  const confirmed = job.status === "dispatch_unconfirmed" ? await confirm(env, job, run.id) : job;
  return isTerminal(run.state) ? settleFromRun(env, confirmed, run) : confirmed;
}

/** Unconfirmed jobs one sweep looks at; the rest wait for the next tick (a bound on every loop). */
export const RECONCILE_SWEEP_MAX = 25;

/**
 * The periodic reconciliation the 202 answer promises: every unconfirmed dispatch whose last
 * attempt is older than the dispatch timeout is retried under its job id, which either finds or
 * creates its one run (dispatched) or leaves it held. It never releases credit: that needs an
 * admin who checked that no paid work happened (docs/runbook.md).
 */
export async function reconcileUnconfirmedJobs(env: Env, config: Config, nowMs = Date.now()) {
  const due = await drizzle(env.DB)
    .select()
    .from(buildJobs)
    .where(and(eq(buildJobs.status, "dispatch_unconfirmed"), lte(buildJobs.dispatchAttemptedAtMs, nowMs - config.buildDispatchTimeoutMs)))
    .orderBy(asc(buildJobs.dispatchAttemptedAtMs))
    .limit(RECONCILE_SWEEP_MAX);
  return reconcileBatch(env, config, due, "ledger.reconcile_sweep", "unconfirmed dispatches past BUILD_DISPATCH_TIMEOUT_MS");
}

/**
 * The settlement backstop: a queued job whose run ended more than the dispatch timeout ago was
 * missed by the run's terminal event (a message lost to the dead-letter queue, say). It is settled
 * from the run's stored outcome, exactly once like every other path (settle.ts).
 */
export async function settleEndedJobs(env: Env, config: Config, nowMs = Date.now()) {
  const rows = await drizzle(env.DB)
    .select({ job: buildJobs })
    .from(buildJobs)
    .innerJoin(runs, eq(runs.id, buildJobs.runId))
    .where(and(eq(buildJobs.status, "queued"), inArray(runs.state, [...TERMINAL_STATES]), lte(runs.updatedAtMs, nowMs - config.buildDispatchTimeoutMs)))
    .orderBy(asc(runs.updatedAtMs))
    .limit(RECONCILE_SWEEP_MAX);
  return reconcileBatch(env, config, rows.map((r) => r.job), "ledger.settle_sweep", "queued jobs whose run ended past BUILD_DISPATCH_TIMEOUT_MS");
}

async function reconcileBatch(env: Env, config: Config, due: JobRow[], msg: string, reason: string) {
  const outcomes: Record<string, ReconcileOutcome | "error"> = {};
  for (const job of due) {
    try {
      outcomes[`${job.orgId}/${job.id}`] = (await reconcileJob(env, config, job, { action: "dispatch", actor: "system:sweep" })).outcome;
    } catch (err) {
      outcomes[`${job.orgId}/${job.id}`] = "error";
      log("ledger.reconcile_failed", { org: job.orgId, job: job.id, reason: String(err) });
    }
  }
  if (due.length > 0) log(msg, { checked: due.length, outcomes, reason });
  return { checked: due.length, outcomes };
}
