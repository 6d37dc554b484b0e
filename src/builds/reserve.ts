// The credit reservation of a build job: taken atomically with the job's creation, and given back
// whole when the job's run was never created (../shared/spec/build-lifecycle.md, "From request to
// reserved job" and "Recover without duplicating spend").

import { and, eq, isNull, lte, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Config } from "../config";
import { buildJobs } from "../db/ledger-schema";
import { statementOf } from "../lib/cost";
import type { Env } from "../env";
import { newId, randomHex } from "../lib/crypto";
import { log } from "../lib/log";
import { applyOp, insertJobEntry } from "../ledger/entries";
import type { JobRow, ProjectRow, RequestRow } from "./payload";
import { labelIfWon, loadJob } from "./store";

/**
 * Reserves min(reservation, available) and creates the job, in one batch whose first statement
 * decides: it inserts the job only when the organization has at least the minimum available, the
 * request has no held job and the job id is new. The rest of the batch acts only if that insert
 * happened (the job's last_op_id is this operation). D1 runs a batch as one transaction and
 * serializes batches, so the same credit never backs two reservations.
 */
export async function reserve(
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
    // Raw SQL: the INSERT … SELECT that decides the reservation, its amount and guards computed from the balance row, which drizzle would hold only as sql text.
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
    insertJobEntry(db, { orgId: request.orgId, jobId, opId, kind: "reserve", amountColumn: "reserved_cents", actor: input.actor, note: `build request ${request.id}`, nowMs }),
    applyOp(db, request.orgId, opId, nowMs),
    labelIfWon(db, { orgId: request.orgId, id: jobId, requestId: request.id }, { label: "queued", opId, nowMs }),
  ]);
  return results[0].meta.changes === 1;
}

/**
 * Releases the whole reservation of a job whose run was never created: one compare-and-swap on
 * the job (still unconfirmed, and no dispatch attempt within `quietMs`), its release entry, the
 * balance and the request label, in one batch.
 */
export async function releaseUnconfirmed(env: Env, job: JobRow, actor: string, reason: string, quietMs: number): Promise<JobRow> {
  const db = env.DB;
  const opId = newId("op");
  const nowMs = Date.now();
  const release = drizzle(db)
    .update(buildJobs)
    .set({
      status: "released",
      releasedCents: sql`${buildJobs.reservedCents}`,
      dispatchError: sql`COALESCE(${buildJobs.dispatchError}, ${reason})`,
      lastOpId: opId,
      updatedAtMs: nowMs,
      endedAtMs: nowMs,
    })
    .where(
      and(
        eq(buildJobs.orgId, job.orgId),
        eq(buildJobs.id, job.id),
        eq(buildJobs.status, "dispatch_unconfirmed"),
        isNull(buildJobs.runId),
        lte(buildJobs.dispatchAttemptedAtMs, nowMs - quietMs),
      ),
    );
  const results = await db.batch([
    statementOf(db, release),
    insertJobEntry(db, { orgId: job.orgId, jobId: job.id, opId, kind: "release", amountColumn: "released_cents", actor, note: reason, nowMs }),
    applyOp(db, job.orgId, opId, nowMs),
    labelIfWon(db, job, { label: "source_review", from: "queued", opId, nowMs }),
  ]);
  if (results[0].meta.changes === 1) log("ledger.released", { org: job.orgId, job: job.id, released_cents: job.reservedCents, actor, reason });
  return loadJob(db, job.orgId, job.id);
}
