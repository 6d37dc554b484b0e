// The build dispatcher: preconditions (preconditions.ts), an atomic credit reservation (reserve.ts),
// and a dispatch keyed by the job id that is confirmed (confirm.ts), or left held for
// reconciliation (reconcile.ts) (../shared/spec/build-lifecycle.md, "From request to reserved job"
// and "Dispatch uses a stable job identifier").

import type { Config } from "../config";
import type { Env } from "../env";
import { DocketError } from "../errors";
import { canonicalJson } from "../lib/canonical-json";
import { sha256Hex } from "../lib/crypto";
import { log } from "../lib/log";
import { attemptDispatch, UNCONFIRMED_MESSAGE } from "./confirm";
import type { JobRow, RequestRow } from "./payload";
import { checkPreconditions, explainRefusal } from "./preconditions";
import { reserve } from "./reserve";
import { findJob, loadJob, loadProject, loadRequest, runIdForKey } from "./store";

export interface DispatchResult {
  job: JobRow;
  /** 201 a new job whose run exists, 200 a replay, 202 reserved but not confirmed. */
  status: 200 | 201 | 202;
  message: string | null;
}

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
    await explainRefusal(env, config, request);
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
