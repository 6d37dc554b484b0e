// Confirming a build dispatch: the job's run is created under the job id, so a retry never
// schedules duplicate work, and the job moves to queued with one compare-and-swap
// (../shared/spec/build-lifecycle.md, "Dispatch uses a stable job identifier").

import { and, eq, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { buildJobs } from "../db/ledger-schema";
import type { Env } from "../env";
import { DocketError } from "../errors";
import { newId } from "../lib/crypto";
import { log } from "../lib/log";
import { runBodyFor, type JobRow } from "./payload";
import { releaseUnconfirmed } from "./reserve";
import { runEngine } from "./run-engine";
import { loadJob } from "./store";

/** Why a dispatch answers 202: the reservation stays held until the job is reconciled. */
export const UNCONFIRMED_MESSAGE =
  "the dispatch could not be confirmed within this request; the credit reservation stays held and the job will be reconciled " +
  "(repeat this call with the same Idempotency-Key, or an admin calls POST /v1/build-jobs/:id/reconcile)";

/**
 * Creates the job's run through the run engine, keyed by the job id, so a retry never schedules
 * duplicate work, and confirms the job with one compare-and-swap. A failure that leaves the outcome
 * unknown keeps the reservation held (build-lifecycle.md: "If dispatch cannot be confirmed within
 * the web request, the reservation stays held").
 */
export async function attemptDispatch(env: Env, job: JobRow, first: boolean): Promise<{ job: JobRow; confirmed: boolean }> {
  const db = drizzle(env.DB);
  const nowMs = Date.now();
  if (!first) {
    // Every attempt records itself on the still-unconfirmed job; a release (which needs a quiet
    // period since the last attempt) and an attempt therefore never both proceed.
    const recorded = await db
      .update(buildJobs)
      .set({ dispatchAttempts: sql`${buildJobs.dispatchAttempts} + 1`, dispatchAttemptedAtMs: nowMs, updatedAtMs: nowMs })
      .where(unconfirmed(job));
    if (recorded.meta.changes !== 1) {
      const now = await loadJob(env.DB, job.orgId, job.id);
      return { job: now, confirmed: now.status !== "released" };
    }
  }
  const unconfirmedAfter = async (err: unknown) => {
    await db
      .update(buildJobs)
      .set({ dispatchError: String(err).slice(0, 2_000), updatedAtMs: Date.now() })
      .where(unconfirmed(job));
    log("ledger.dispatch_unconfirmed", { org: job.orgId, job: job.id, reserved_cents: job.reservedCents, reason: `the run dispatch got no answer: ${String(err)}` });
    return { job: await loadJob(env.DB, job.orgId, job.id), confirmed: false };
  };
  let runId: string;
  try {
    runId = (await runEngine.dispatch(env, job.orgId, runBodyFor(job), job.id)).id;
  } catch (err) {
    if (!(err instanceof DocketError && err.code === "idempotency_conflict")) return unconfirmedAfter(err);
    let ours: string | null;
    try {
      ours = await ownRun(env, job, err.details.run_id);
    } catch (readErr) {
      return unconfirmedAfter(readErr);
    }
    if (!ours) {
      // Definitive: the key belongs to another run, so this job's run can never exist.
      const released = await releaseUnconfirmed(env, job, "system", `dispatch refused: ${err.message}`, 0);
      log("ledger.dispatch_refused", { org: job.orgId, job: job.id, status: released.status, reason: err.message });
      throw err;
    }
    runId = ours;
  }
  return { job: await confirm(env, job, runId), confirmed: true };
}

/** The job while it is still unconfirmed: each write of a dispatch attempt is conditional on it. */
function unconfirmed(job: JobRow) {
  return and(eq(buildJobs.orgId, job.orgId), eq(buildJobs.id, job.id), eq(buildJobs.status, "dispatch_unconfirmed"));
}

/** The run named by a conflicting key is this job's own run when its metadata names the job. */
async function ownRun(env: Env, job: JobRow, runId: unknown): Promise<string | null> {
  if (typeof runId !== "string") return null;
  const run = await runEngine.read(env, job.orgId, runId);
  return run && run.metadata?.docket_job_id === job.id ? run.id : null;
}

/** dispatch_unconfirmed → queued with the run id. A run that arrives after its job was released is cancelled. */
export async function confirm(env: Env, job: JobRow, runId: string): Promise<JobRow> {
  const nowMs = Date.now();
  const confirmed = await drizzle(env.DB)
    .update(buildJobs)
    .set({ status: "queued", runId, dispatchConfirmedAtMs: nowMs, dispatchError: null, lastOpId: newId("op"), updatedAtMs: nowMs })
    .where(unconfirmed(job));
  const after = await loadJob(env.DB, job.orgId, job.id);
  if (confirmed.meta.changes === 1) {
    log("ledger.dispatch_confirmed", { org: job.orgId, job: job.id, run_id: runId, reason: "the run was dispatched" });
  } else if (after.status === "released") {
    // The reservation went back while this dispatch was in flight: no paid work may run unreserved.
    log("ledger.late_dispatch_cancelled", { org: job.orgId, job: job.id, run_id: runId, reason: "the reservation was released before the dispatch was confirmed" });
    await runEngine.cancel(env, job.orgId, runId, `build job ${job.id} was released before its dispatch was confirmed`);
  }
  return after;
}
