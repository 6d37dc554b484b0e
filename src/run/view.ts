import type { Run } from "../protocol/runs";
import { blockerView } from "./blocker";
import type { Checkpoint, Publication, RunRecord } from "./types";

function checkpointView(c: Checkpoint) {
  return {
    attempt: c.attempt,
    session_id: c.sessionId,
    last_phase: c.lastPhase,
    pending_actions: c.pendingActions,
    source_revision: c.sourceRevision,
    note: c.note,
    patch_chars: c.patchChars,
    session_chars: c.sessionChars,
    at_ms: c.atMs,
  };
}

/** The run as the API shows it (docs/protocol.md, "Runs"), all but its callback's delivery and why it waits, which are read from D1. */
export function runView(run: RunRecord): Omit<Run, "callback" | "waiting"> {
  return {
    id: run.id,
    org_id: run.orgId,
    state: run.state,
    attempt: run.attempt,
    version: run.version,
    brief: run.brief,
    repository: run.repository,
    labels: run.labels,
    priority: run.priority,
    launch: run.launch,
    callback_url: run.callbackUrl,
    metadata: run.metadata,
    project_id: run.projectId ?? null,
    continuation: run.continuation,
    hold: run.hold,
    checkpoint: run.checkpoint ? checkpointView(run.checkpoint) : null,
    recovery_problem: run.recoveryProblem ?? null,
    recovery_failure: run.recoveryFailure
      ? { recovery_at_ms: run.recoveryFailure.recoveryAtMs, tries: run.recoveryFailure.tries, error: run.recoveryFailure.error }
      : null,
    pause_reason: run.pauseReason ?? null,
    machine_id: run.machineId,
    sandbox_id: run.sandboxId,
    phase: run.phase,
    lease_expires_at_ms: run.leaseExpiresAtMs,
    launch_deadline_at_ms: run.launchDeadlineAtMs,
    last_report_at_ms: run.lastReportAtMs,
    not_before_ms: run.notBeforeMs,
    stop_request: run.stopRequest && {
      requested_at_ms: run.stopRequest.requestedAtMs,
      reason: run.stopRequest.reason,
      by: run.stopRequest.by,
    },
    last_error: run.lastError,
    blocker: blockerView(run.blocker),
    publication: publicationView(run.publication ?? null),
    artifact: run.artifact && {
      patch: run.artifact.patch,
      empty: run.artifact.empty,
      source_revision: run.artifact.sourceRevision,
      model: run.artifact.model,
      limitations: run.artifact.limitations,
      exit_codes: run.artifact.exitCodes,
    },
    cost_cents: run.costCents,
    steps: run.steps.map((s) => ({
      attempt: s.attempt,
      machine_id: s.machineId,
      claimed_at_ms: s.claimedAtMs,
      launched_at_ms: s.launchedAtMs,
      sandbox_id: s.sandboxId,
      ended_at_ms: s.endedAtMs,
      outcome: s.outcome,
      error: s.error,
    })),
    state_history: run.stateHistory?.map((h) => ({ from: h.from, to: h.to, reason: h.reason, attempt: h.attempt, at_ms: h.atMs })) ?? null,
    state_history_dropped: run.stateHistoryDropped ?? 0,
    created_at_ms: run.createdAtMs,
    updated_at_ms: run.updatedAtMs,
    ended_at_ms: run.endedAtMs,
  };
}

export type RunView = ReturnType<typeof runView>;

function publicationView(p: Publication | null) {
  return (
    p && {
      branch: p.branch,
      source_revision: p.sourceRevision,
      patch_digest: p.patchDigest,
      intent_at_ms: p.intentAtMs,
      head_sha: p.headSha,
      pushed_at_ms: p.pushedAtMs,
      tries: p.tries,
      create_requested_at_ms: p.createRequestedAtMs ?? null,
      next_try_at_ms: p.nextTryAtMs,
      last_error: p.lastError,
      pr: p.pr && { number: p.pr.number, url: p.pr.url, confirmed_at_ms: p.pr.confirmedAtMs },
    }
  );
}

/**
 * The directives that answer a waiting lease call at once while pending (durable-objects/run/leases.ts, leaseWait): a
 * stop request. A pause is the run's state (`pausing`, `pause_requested` in the answer): its start
 * wakes a waiting call, as any change of state does, and a runner that may have missed that answer
 * asks without waiting (docs/protocol.md, "Lease waits").
 */
export function directives(run: RunRecord): { stop_requested: boolean } {
  return { stop_requested: run.stopRequest !== null };
}

export function directivePending(run: RunRecord): boolean {
  return Object.values(directives(run)).some(Boolean);
}

/** What a waiting lease call watches: the attempt, its state and its directives; any change wakes it. */
export function leaseWatch(run: RunRecord): string {
  return JSON.stringify([run.attempt, run.state, directives(run)]);
}

/** What a runner's attempt call answers. */
export function attemptView(run: RunRecord) {
  return {
    run_id: run.id,
    attempt: run.attempt,
    state: run.state,
    lease_expires_at_ms: run.leaseExpiresAtMs,
    ...directives(run),
    pause_requested: run.state === "pausing",
  };
}
