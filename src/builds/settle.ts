// Completion and settlement of build jobs. Settlement is driven by the run's terminal event (the
// outbox consumer), by the completion callback, and by reconciliation; every path reads the run
// object (the authority for state, cost and artifact) and settles with one compare-and-swap batch,
// so a replayed or reordered completion changes nothing and a job settles at most once
// (../shared/spec/build-lifecycle.md, "Events and completion retry independently").

import { and, eq, isNull, or } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { buildJobs } from "../db/ledger-schema";
import type { Env, OutboxMessage } from "../env";
import { DocketError } from "../errors";
import { newId } from "../lib/crypto";
import { logRun } from "../lib/log";
import { resolveHeld, runEndStatements, type Resolution } from "../ledger/settle-held";
import { isTerminal, terminalStateOf } from "../run/states";
import type { RunView } from "../run/view";
import type { JobRow } from "./payload";
import { runEngine } from "./run-engine";
import { labelForOutcome, OPEN_JOB_STATUSES } from "./states";
import { findJob, labelIfWon, loadJob } from "./store";

/**
 * Settles a job from its finished run: the cost within the reservation is settled and the rest
 * released, exactly once; a cost above the reservation or unknown keeps everything held for review.
 * A job that is not open (already settled, held or released) is left as it is.
 */
export async function settleFromRun(env: Env, job: JobRow, run: RunView): Promise<JobRow> {
  if (!isTerminal(run.state) || !OPEN_JOB_STATUSES.includes(job.status as never)) return job;
  const db = env.DB;
  const opId = newId("op");
  const nowMs = Date.now();
  const holder = { holder: "job" as const, orgId: job.orgId, holderId: job.id, reservedCents: job.reservedCents };
  const { decision, statements } = runEndStatements(db, { ...holder, run, actor: "system", opId, nowMs });
  statements.push(labelIfWon(db, job, { label: labelForOutcome(decision.outcome), opId, nowMs }));
  const results = await db.batch(statements);
  const after = await loadJob(db, job.orgId, job.id);
  if (results[0].meta.changes === 1) {
    logRun("ledger.job_finished", {
      run: run.id,
      attempt: run.attempt,
      org: job.orgId,
      job: job.id,
      status: after.status,
      outcome: after.outcome,
      reserved_cents: job.reservedCents,
      cost_cents: after.costCents,
      settled_cents: after.settledCents,
      released_cents: after.releasedCents,
      review_reason: after.reviewReason,
      reason: `its run ended ${run.state}`,
    });
  }
  return after;
}

/** Finds the run a job became: by its recorded run id, or by the job id the run engine keyed it by. */
export async function findJobRun(env: Env, job: JobRow, runIdFromKey: () => Promise<string | null>): Promise<RunView | null> {
  const runId = job.runId ?? (await runIdFromKey());
  if (!runId) return null;
  const run = await runEngine.read(env, job.orgId, runId);
  if (run && run.metadata?.docket_job_id !== job.id) {
    logRun("ledger.run_mismatch", { run: runId, attempt: run.attempt, org: job.orgId, job: job.id, reason: "the run found for this job was dispatched for another job" });
    return null;
  }
  return run;
}

/**
 * The outbox consumer's handler: a run reached a terminal state, so its job (if it is a build job)
 * settles. Idempotent and order-free: it reads the run object rather than the event's data.
 */
export async function settleBuildOnRunEvent(env: Env, event: OutboxMessage): Promise<void> {
  if (!terminalStateOf(event)) return;
  // Most runs are not build jobs: ask the run object only when a job of this org is waiting on one.
  const waiting = await drizzle(env.DB)
    .select({ id: buildJobs.id })
    .from(buildJobs)
    .where(
      and(
        eq(buildJobs.orgId, event.org_id),
        or(and(eq(buildJobs.status, "queued"), eq(buildJobs.runId, event.run_id)), and(eq(buildJobs.status, "dispatch_unconfirmed"), isNull(buildJobs.runId))),
      ),
    )
    .limit(1)
    .get();
  if (!waiting) return;
  const run = await runEngine.read(env, event.org_id, event.run_id);
  const jobId = run?.metadata?.docket_job_id;
  if (!run || !jobId) return;
  const job = await findJob(env.DB, event.org_id, jobId);
  if (!job || (job.runId !== null && job.runId !== run.id)) return;
  await settleFromRun(env, job, run);
}

/**
 * An admin resolves a job held for cost review or reconciliation with the reconciled cost
 * (build-lifecycle.md, "Recover without duplicating spend": reconcile unknown costs before
 * releasing credit). Within the reservation it settles and releases the rest; above it, the excess
 * is charged to available credit, which must cover it: never silently capped.
 */
export async function resolveJob(env: Env, job: JobRow, input: Resolution): Promise<JobRow> {
  const notHeld = (j: JobRow) => new DocketError("job_not_held", `job ${j.id} is ${j.status}, not held for cost review or reconciliation`, { status: j.status });
  return resolveHeld(env.DB, {
    holder: "job",
    orgId: job.orgId,
    holderId: job.id,
    row: job,
    load: () => loadJob(env.DB, job.orgId, job.id),
    notHeld,
    logged: { event: "ledger.job_resolved", fields: { org: job.orgId, job: job.id }, reason: "an admin resolved a held job" },
  }, input);
}
