// The build dispatcher: preconditions, an atomic credit reservation, and a dispatch keyed by the job
// id that is confirmed, or left held for reconciliation (../shared/spec/build-lifecycle.md, "From
// request to reserved job" and "Dispatch uses a stable job identifier").

import { and, asc, eq, inArray, lte } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Config } from "../config";
import { buildJobs } from "../db/ledger-schema";
import { runs } from "../db/schema";
import type { Env } from "../env";
import { DocketError } from "../errors";
import { canonicalJson } from "../lib/canonical-json";
import { newId, randomHex, sha256Hex } from "../lib/crypto";
import { log } from "../lib/log";
import { applyOp, insertJobEntry } from "../ledger/entries";
import { readBalance } from "../ledger/ledger";
import { isTerminal, TERMINAL_STATES } from "../run/states";
import type { LaunchSpec } from "../run/types";
import { runBodyFor, type JobRow, type ProjectRow, type RequestRow } from "./payload";
import { runEngine } from "./run-engine";
import { findJobRun, settleFromRun } from "./settle";
import { OPEN_JOB_STATUSES, REVIEW_JOB_STATUSES } from "./states";
import { findJob, hasConnectedRunner, loadJob, loadProject, loadRequest, runIdForKey } from "./store";

export interface DispatchResult {
  job: JobRow;
  /** 201 a new job whose run exists, 200 a replay, 202 reserved but not confirmed. */
  status: 200 | 201 | 202;
  message: string | null;
}

const UNCONFIRMED_MESSAGE =
  "the dispatch could not be confirmed within this request; the credit reservation stays held and the job will be reconciled " +
  "(repeat this call with the same Idempotency-Key, or an admin calls POST /v1/build-jobs/:id/reconcile)";

/** What the member asked for: a replay must ask for exactly the same. */
async function requestHash(request: RequestRow, body: unknown): Promise<string> {
  return sha256Hex(
    canonicalJson({
      request_id: request.id,
      pinned_commit: request.pinnedCommit,
      migration_plan: request.migrationPlan,
      chain_target: request.chainTarget,
      body,
    }),
  );
}

/**
 * The preconditions, each with its own code (build-lifecycle.md, "From request to reserved job":
 * a saved plan, an accepted license, a connected runner and at least the minimum available).
 */
async function checkPreconditions(env: Env, config: Config, project: ProjectRow, request: RequestRow, nowMs: number): Promise<void> {
  if (request.planSavedAtMs === null) {
    throw new DocketError("plan_required", "save the source plan first: PUT /v1/build-requests/:id/plan", { request_id: request.id });
  }
  if (project.licenseAcceptedAtMs === null) {
    throw new DocketError("license_required", "accept the project's license first: POST /v1/projects/:id/license", { project_id: project.id });
  }
  const held = await drizzle(env.DB)
    .select({ id: buildJobs.id, status: buildJobs.status })
    .from(buildJobs)
    .where(and(eq(buildJobs.orgId, request.orgId), eq(buildJobs.requestId, request.id), inArray(buildJobs.status, [...OPEN_JOB_STATUSES, ...REVIEW_JOB_STATUSES])))
    .get();
  if (held) refuseHeld(request, held);
  const launch = JSON.parse(project.launch) as LaunchSpec;
  if (!(await hasConnectedRunner(env.DB, request.orgId, { protocol: launch.protocol, labels: JSON.parse(project.labels) }, config.runnerConnectedWindowMs, nowMs))) {
    throw new DocketError("no_connected_runner", `no runner that can serve this project was heard from within ${config.runnerConnectedWindowMs} ms`, {
      window_ms: config.runnerConnectedWindowMs,
    });
  }
  const balance = await readBalance(env.DB, request.orgId);
  if (balance.available_cents < config.buildMinAvailableCents) refuseCredit(config, balance.available_cents);
}

function refuseHeld(request: RequestRow, held: { id: string; status: string }): never {
  if (REVIEW_JOB_STATUSES.includes(held.status as never)) {
    // "Reconcile unknown costs before releasing credit or creating a new paid job" (build-lifecycle.md, "Recover without duplicating spend").
    throw new DocketError("cost_review_pending", `job ${held.id} of this request is held for ${held.status}; resolve it before a new paid job`, {
      request_id: request.id,
      job_id: held.id,
      status: held.status,
    });
  }
  throw new DocketError("job_already_queued", `this request already has a queued job (${held.id})`, { request_id: request.id, job_id: held.id, status: held.status });
}

function refuseCredit(config: Config, availableCents: number): never {
  throw new DocketError("insufficient_credit", `a build needs at least ${config.buildMinAvailableCents} cents of available credit`, {
    available_cents: availableCents,
    min_available_cents: config.buildMinAvailableCents,
  });
}

/**
 * Reserves min(reservation, available) and creates the job, in one batch whose first statement
 * decides: it inserts the job only when the organization has at least the minimum available, the
 * request has no held job and the job id is new. The rest of the batch acts only if that insert
 * happened (the job's last_op_id is this operation). D1 runs a batch as one transaction and
 * serializes batches, so the same credit never backs two reservations.
 */
async function reserve(
  env: Env,
  config: Config,
  input: { project: ProjectRow; request: RequestRow; jobId: string; requestHash: string; actor: string; createdBy: string; origin: string; nowMs: number },
): Promise<boolean> {
  const db = env.DB;
  const { project, request, jobId, nowMs } = input;
  const opId = newId("op");
  const callbackToken = `cb_${randomHex(24)}`;
  // The exact completion callback URL of this job (build-lifecycle.md, "Dispatch uses a stable job identifier").
  const callbackUrl = `${input.origin}/v1/build-callbacks/${callbackToken}`;
  const results = await db.batch([
    db
      .prepare(
        `INSERT INTO build_jobs (org_id, id, request_id, project_id, status, outcome, review_reason, request_hash,
           source_url, pinned_commit, migration_plan, chain_target, launch, labels, callback_url, callback_token,
           run_id, reserved_cents, cost_cents, settled_cents, released_cents, charged_cents, artifact_exists, artifact_empty,
           last_op_id, dispatch_attempts, dispatch_attempted_at_ms, created_by, created_at_ms, updated_at_ms)
         SELECT ?, ?, ?, ?, 'dispatch_unconfirmed', NULL, NULL, ?,
           ?, ?, ?, ?, ?, ?, ?, ?,
           NULL, MIN(?, b.granted_cents - b.held_cents - b.spent_cents), NULL, 0, 0, 0, 0, NULL,
           ?, 1, ?, ?, ?, ?
         FROM credit_balances b
         WHERE b.org_id = ? AND b.granted_cents - b.held_cents - b.spent_cents >= ?
           AND NOT EXISTS (SELECT 1 FROM build_jobs j WHERE j.org_id = ? AND j.request_id = ?
                           AND j.status IN ('dispatch_unconfirmed', 'queued', 'cost_review', 'reconcile'))
           AND NOT EXISTS (SELECT 1 FROM build_jobs j WHERE j.org_id = ? AND j.id = ?)`,
      )
      .bind(
        request.orgId,
        jobId,
        request.id,
        project.id,
        input.requestHash,
        project.sourceUrl,
        request.pinnedCommit,
        request.migrationPlan,
        request.chainTarget,
        project.launch,
        project.labels,
        callbackUrl,
        callbackToken,
        config.buildReservationCents,
        opId,
        nowMs,
        input.createdBy,
        nowMs,
        nowMs,
        request.orgId,
        config.buildMinAvailableCents,
        request.orgId,
        request.id,
        request.orgId,
        jobId,
      ),
    insertJobEntry(db, { id: newId("led"), orgId: request.orgId, jobId, opId, kind: "reserve", amountColumn: "reserved_cents", actor: input.actor, note: `build request ${request.id}`, nowMs }),
    applyOp(db, request.orgId, opId, nowMs),
    db
      .prepare(
        `UPDATE build_requests SET label = 'queued', updated_at_ms = ?
         WHERE org_id = ? AND id = ? AND EXISTS (SELECT 1 FROM build_jobs WHERE org_id = ? AND id = ? AND last_op_id = ?)`,
      )
      .bind(nowMs, request.orgId, request.id, request.orgId, jobId, opId),
  ]);
  return results[0].meta.changes === 1;
}

/** Dispatches a build request: a new job (201 or 202), a replay (200), or a refusal. */
export async function dispatchBuild(
  env: Env,
  config: Config,
  input: { orgId: string; requestId: string; jobId: string; body: unknown; tokenId: string; origin: string },
): Promise<DispatchResult> {
  const request = await loadRequest(env.DB, input.orgId, input.requestId);
  const project = await loadProject(env.DB, input.orgId, request.projectId);
  const hash = await requestHash(request, input.body);
  const existing = await findJob(env.DB, input.orgId, input.jobId);
  if (existing) return replay(env, config, existing, hash);

  const nowMs = Date.now();
  await checkPreconditions(env, config, project, request, nowMs);
  // The job id is the run's Idempotency-Key: one already spent on another run cannot name this job.
  const taken = await runIdForKey(env.DB, input.orgId, input.jobId);
  if (taken) throw new DocketError("idempotency_conflict", "this Idempotency-Key was already used for another run", { run_id: taken });

  const actor = `member:${input.tokenId}`;
  const won = await reserve(env, config, { project, request, jobId: input.jobId, requestHash: hash, actor, createdBy: input.tokenId, origin: input.origin, nowMs });
  if (!won) {
    // The reservation statement refused; say why (the refusal itself was decided atomically).
    const raced = await findJob(env.DB, input.orgId, input.jobId);
    if (raced) return replay(env, config, raced, hash);
    const held = await drizzle(env.DB)
      .select({ id: buildJobs.id, status: buildJobs.status })
      .from(buildJobs)
      .where(and(eq(buildJobs.orgId, input.orgId), eq(buildJobs.requestId, request.id), inArray(buildJobs.status, [...OPEN_JOB_STATUSES, ...REVIEW_JOB_STATUSES])))
      .get();
    if (held) refuseHeld(request, held);
    refuseCredit(config, (await readBalance(env.DB, input.orgId)).available_cents);
  }
  const job = await loadJob(env.DB, input.orgId, input.jobId);
  log("ledger.reserved", { org: job.orgId, job: job.id, request: job.requestId, reserved_cents: job.reservedCents, actor, reason: "a build request was dispatched" });
  const attempt = await attemptDispatch(env, job, true);
  return { job: attempt.job, status: attempt.confirmed ? 201 : 202, message: attempt.confirmed ? null : UNCONFIRMED_MESSAGE };
}

/** The same job id again: the same payload replays the job (retrying an unconfirmed dispatch); another is a conflict. */
async function replay(env: Env, config: Config, job: JobRow, hash: string): Promise<DispatchResult> {
  if (job.requestHash !== hash) {
    throw new DocketError("idempotency_conflict", "this job id (Idempotency-Key) was used with another payload", { job_id: job.id, request_id: job.requestId });
  }
  if (job.status !== "dispatch_unconfirmed") return { job, status: 200, message: null };
  const attempt = await attemptDispatch(env, job, false);
  return { job: attempt.job, status: attempt.confirmed ? 200 : 202, message: attempt.confirmed ? null : UNCONFIRMED_MESSAGE };
}

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
    const recorded = await env.DB.prepare(
      `UPDATE build_jobs SET dispatch_attempts = dispatch_attempts + 1, dispatch_attempted_at_ms = ?, updated_at_ms = ?
       WHERE org_id = ? AND id = ? AND status = 'dispatch_unconfirmed'`,
    )
      .bind(nowMs, nowMs, job.orgId, job.id)
      .run();
    if (recorded.meta.changes !== 1) {
      const now = await loadJob(env.DB, job.orgId, job.id);
      return { job: now, confirmed: now.status !== "released" };
    }
  }
  const unconfirmed = async (err: unknown) => {
    await db
      .update(buildJobs)
      .set({ dispatchError: String(err).slice(0, 2_000), updatedAtMs: Date.now() })
      .where(and(eq(buildJobs.orgId, job.orgId), eq(buildJobs.id, job.id), eq(buildJobs.status, "dispatch_unconfirmed")));
    log("ledger.dispatch_unconfirmed", { org: job.orgId, job: job.id, reserved_cents: job.reservedCents, reason: `the run dispatch got no answer: ${String(err)}` });
    return { job: await loadJob(env.DB, job.orgId, job.id), confirmed: false };
  };
  let runId: string;
  try {
    runId = (await runEngine.dispatch(env, job.orgId, runBodyFor(job), job.id)).id;
  } catch (err) {
    if (!(err instanceof DocketError && err.code === "idempotency_conflict")) return unconfirmed(err);
    let ours: string | null;
    try {
      ours = await ownRun(env, job, err.details.run_id);
    } catch (readErr) {
      return unconfirmed(readErr);
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

/** The run named by a conflicting key is this job's own run when its metadata names the job. */
async function ownRun(env: Env, job: JobRow, runId: unknown): Promise<string | null> {
  if (typeof runId !== "string") return null;
  const run = await runEngine.read(env, job.orgId, runId);
  return run && run.metadata?.docket_job_id === job.id ? run.id : null;
}

/** dispatch_unconfirmed → queued with the run id. A run that arrives after its job was released is cancelled. */
async function confirm(env: Env, job: JobRow, runId: string): Promise<JobRow> {
  const nowMs = Date.now();
  const confirmed = await env.DB.prepare(
    `UPDATE build_jobs SET status = 'queued', run_id = ?, dispatch_confirmed_at_ms = ?, dispatch_error = NULL, last_op_id = ?, updated_at_ms = ?
     WHERE org_id = ? AND id = ? AND status = 'dispatch_unconfirmed'`,
  )
    .bind(runId, nowMs, newId("op"), nowMs, job.orgId, job.id)
    .run();
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

/**
 * Releases the whole reservation of a job whose run was never created: one compare-and-swap on
 * the job (still unconfirmed, and no dispatch attempt within `quietMs`), its release entry, the
 * balance and the request label, in one batch.
 */
async function releaseUnconfirmed(env: Env, job: JobRow, actor: string, reason: string, quietMs: number): Promise<JobRow> {
  const db = env.DB;
  const opId = newId("op");
  const nowMs = Date.now();
  const results = await db.batch([
    db
      .prepare(
        `UPDATE build_jobs SET status = 'released', released_cents = reserved_cents, dispatch_error = COALESCE(dispatch_error, ?),
           last_op_id = ?, updated_at_ms = ?, ended_at_ms = ?
         WHERE org_id = ? AND id = ? AND status = 'dispatch_unconfirmed' AND run_id IS NULL AND dispatch_attempted_at_ms <= ?`,
      )
      .bind(reason, opId, nowMs, nowMs, job.orgId, job.id, nowMs - quietMs),
    insertJobEntry(db, { id: newId("led"), orgId: job.orgId, jobId: job.id, opId, kind: "release", amountColumn: "released_cents", actor, note: reason, nowMs }),
    applyOp(db, job.orgId, opId, nowMs),
    db
      .prepare(
        `UPDATE build_requests SET label = 'source_review', updated_at_ms = ?
         WHERE org_id = ? AND id = ? AND label = 'queued' AND EXISTS (SELECT 1 FROM build_jobs WHERE org_id = ? AND id = ? AND last_op_id = ?)`,
      )
      .bind(nowMs, job.orgId, job.requestId, job.orgId, job.id, opId),
  ]);
  if (results[0].meta.changes === 1) log("ledger.released", { org: job.orgId, job: job.id, released_cents: job.reservedCents, actor, reason });
  return loadJob(db, job.orgId, job.id);
}

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
  if (job.status === "dispatch_unconfirmed") {
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
  if (job.status === "queued") {
    const run = await findJobRun(env, job, async () => null);
    if (run && isTerminal(run.state)) {
      const after = await settleFromRun(env, job, run);
      return { job: after, outcome: after.status === "settled" ? "settled" : "held", message: `run ${run.id} is ${run.state}; the job is ${after.status}` };
    }
    return { job, outcome: "in_progress", message: run ? `run ${run.id} is ${run.state}` : "the run could not be read" };
  }
  const outcome: ReconcileOutcome = job.status === "released" ? "released" : job.status === "settled" ? "settled" : "held";
  return { job, outcome, message: `the job is ${job.status}; nothing to reconcile${outcome === "held" ? " (resolve it: POST /v1/build-jobs/:id/resolve)" : ""}` };
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
