// The pure parts of publication (../shared/spec/run-lifecycle.md, "Completion and recovery"):
// which outcome may be published, the intent persisted with the transition to publishing, and who
// holds a publishing run. No I/O: decide() and the run object use these.

import type { FinalReport, Publication, RunRecord } from "./types";

/** The only branch a run pushes: derived from its id, so a retry never invents another. */
export function publicationBranch(runId: string): string {
  return `docket/${runId}`;
}

/**
 * A verified successful outcome tied to this run's work: an autopilot run (it has a ticket) whose
 * daemon reported `completed` with a non-empty patch and whose digest the run object computed.
 */
export function publishable(run: RunRecord, final: FinalReport): final is FinalReport & { patchDigest: string } {
  return Boolean(run.ticketKey) && final.outcome === "completed" && (final.artifact?.patch.trim().length ?? 0) > 0 && typeof final.patchDigest === "string";
}

export function publicationIntent(run: RunRecord, final: FinalReport & { patchDigest: string }, now: number): Publication {
  return {
    branch: publicationBranch(run.id),
    sourceRevision: final.artifact?.sourceRevision ?? run.repository?.commit ?? null,
    patchDigest: final.patchDigest,
    intentAtMs: now,
    headSha: null,
    pushedAtMs: null,
    tries: 0,
    nextTryAtMs: null,
    lastError: null,
    pr: null,
  };
}

/** A publishing run whose push has not been reported: the attempt's machine still holds it. */
export function awaitingPush(run: RunRecord): boolean {
  return run.state === "publishing" && !!run.publication && run.publication.headSha === null && run.machineId !== null;
}

/** A publishing run whose branch is pushed and whose PR is not yet stored: Docket's PR step is due. */
export function prStepDueAtMs(run: RunRecord): number | null {
  const p = run.publication;
  if (run.state !== "publishing" || !p || p.headSha === null || p.pr !== null) return null;
  return p.nextTryAtMs ?? p.pushedAtMs ?? 0;
}

/** A queued publication continuation: pushed ones go straight to the PR step, others need a push-only job. */
export function queuedPublication(run: RunRecord): "pushed" | "push" | null {
  if (run.state !== "queued" || run.continuation !== "publishing" || !run.publication) return null;
  return run.publication.headSha !== null ? "pushed" : "push";
}
