import type { RunState } from "./states";

export interface LaunchSpec {
  protocol: string;
  command: string[];
  image: string | null;
  env: Record<string, string>;
}

export interface Repository {
  url: string;
  commit: string | null;
}

export interface StopRequest {
  requestedAtMs: number;
  reason: string | null;
  by: string;
}

export interface Artifact {
  patch: string;
  sourceRevision: string | null;
  model: string | null;
  limitations: string[];
  exitCodes: Record<string, number>;
  /** True when the daemon reported no patch content at all. */
  empty: boolean;
  /** Set in storage only: the patch is kept in chunks under this attempt (durable-objects/artifact-store.ts). */
  patchAttempt?: number;
}

/** The pull request that confirms a publication (run-lifecycle.md, "Completion and recovery"). */
export interface PublishedPullRequest {
  number: number;
  url: string;
  confirmedAtMs: number;
}

/**
 * A publication: its intent is persisted with the transition to publishing, before any side
 * effect; each later step (push, PR) is recorded before the next one starts.
 */
export interface Publication {
  /** `docket/<run id>`: the only branch this run ever pushes. */
  branch: string;
  /** The revision the work was made on (the artifact's source revision, else the dispatched commit). */
  sourceRevision: string | null;
  /** sha256 of the patch being published, hex. */
  patchDigest: string;
  intentAtMs: number;
  /** The head the runner reported after its push; null until then. */
  headSha: string | null;
  pushedAtMs: number | null;
  /** Tries of the PR step so far (bounded by PUBLICATION_TRIES_MAX) and when the next may start. */
  tries: number;
  nextTryAtMs: number | null;
  /** When Docket last asked the host to create the PR (recorded before the request is sent). */
  createRequestedAtMs?: number | null;
  /** The last failure of the PR step, for the run's view. */
  lastError: string | null;
  pr: PublishedPullRequest | null;
}

/**
 * What a paused run keeps to continue where it stopped (../shared/spec/run-lifecycle.md, "Pause and
 * continuation"): the agent's session and phase, and the work as a patch on the source revision.
 * The record holds only this description; the patch and the session text live in the run object's
 * checkpoint table (durable-objects/checkpoint-store.ts), written in the same transaction.
 */
export interface Checkpoint {
  /** The attempt whose daemon uploaded it. */
  attempt: number;
  sessionId: string | null;
  lastPhase: string | null;
  pendingActions: string[];
  sourceRevision: string | null;
  /** Why the checkpoint is partial, when it is (the agent ignored the request and was stopped). */
  note: string | null;
  patchChars: number;
  /** Characters of the session's JSON text; null when the agent gave no session. */
  sessionChars: number | null;
  atMs: number;
}

/** One claim of the run: exactly one attempt (DESIGN.md, invariant 2). */
export interface Step {
  attempt: number;
  machineId: string;
  claimedAtMs: number;
  launchedAtMs: number | null;
  sandboxId: string | null;
  endedAtMs: number | null;
  outcome: string | null;
  error: string | null;
}

/** Everything the run object knows about its run; changes only through decide(). */
export interface RunRecord {
  id: string;
  orgId: string;
  state: RunState;
  attempt: number;
  version: number;
  brief: string;
  repository: Repository | null;
  labels: string[];
  priority: number;
  launch: LaunchSpec;
  callbackUrl: string | null;
  /** Free-form string tags a dispatcher attaches to the run. */
  metadata: Record<string, string>;
  /**
   * The tracker ticket whose admission created the run (`github:owner/repo#12`), set only by
   * autopilot admission, never by a dispatch body: a claim asks that ticket first. Absent or null
   * on every other run (and on runs stored before it existed).
   */
  ticketKey?: string | null;
  /**
   * The autopilot project whose admission created the run, set only by autopilot admission next to
   * ticketKey: the scheduler applies that project's gates to it (docs/protocol.md, "Autopilot
   * scheduler"). Absent or null on every other run.
   */
  projectId?: string | null;
  /** Where a paused or queued continuation resumes (run-lifecycle.md, "Pause and continuation"). */
  continuation: "implementing" | "publishing" | null;
  /** A durable operator hold: only an explicit resume clears it. */
  hold: boolean;
  /** The latest checkpoint of a paused implementation; absent on runs stored before checkpoints. */
  checkpoint?: Checkpoint | null;
  /** Why the run cannot continue as it stands (a checkpoint missing or unusable); cleared by a resume that can. */
  recoveryProblem?: string | null;
  /** The recovery (its start, src/recovery.ts) that last observed this run: each observes it once. */
  recoveredEpochMs?: number | null;
  /**
   * A recovery that could not reconcile this run: it was passed over after `tries` failed tries
   * (RECOVERY_RUN_TRIES_MAX, src/recovery.ts) with the last error; cleared when a later recovery reconciles it.
   */
  recoveryFailure?: { recoveryAtMs: number; tries: number; error: string } | null;
  /** Why the run was last paused, as the pause said. */
  pauseReason?: string | null;
  machineId: string | null;
  sandboxId: string | null;
  phase: string | null;
  claimedAtMs: number | null;
  launchedAtMs: number | null;
  leaseExpiresAtMs: number | null;
  launchDeadlineAtMs: number | null;
  lastReportAtMs: number | null;
  /**
   * The last daemon report accepted with a sequence number, and its attempt: a report carrying this
   * seq again is a retry whose answer was lost (docs/protocol.md, "Daemon reports"). Absent on runs
   * stored before reports carried a seq.
   */
  lastReportSeq?: { attempt: number; seq: number } | null;
  queuedAtMs: number;
  notBeforeMs: number;
  stopRequest: StopRequest | null;
  lastError: string | null;
  /** Why a blocked run waits for a human readiness change (../shared/spec/run-lifecycle.md, "Blocker and failure"). */
  blocker: RunBlocker | null;
  /** The publication of an autopilot run's result; absent or null before one started. */
  publication?: Publication | null;
  artifact: Artifact | null;
  costCents: number | null;
  steps: Step[];
  /**
   * The run's changes of state, oldest first: the newest RUN_STATE_HISTORY_MAX of them, and how many
   * older ones were let go. Absent on runs stored before the record kept them (their events tell).
   */
  stateHistory?: StateChange[];
  stateHistoryDropped?: number;
  createdAtMs: number;
  updatedAtMs: number;
  endedAtMs: number | null;
}

/** What an agent reports when it cannot go on without a person. */
export interface BlockerReport {
  summary: string;
  evidence: string[];
  questions: string[];
  humanAction: string;
}

/** A stored blocker: the report, the attempt whose agent made it, and when. */
export interface RunBlocker extends BlockerReport {
  attempt: number;
  atMs: number;
}

export interface FinalReport {
  outcome: "completed" | "failed" | "blocked";
  /** Set with outcome "blocked" only. */
  blocker?: BlockerReport | null;
  error: string | null;
  exitCodes: Record<string, number>;
  artifact: {
    patch: string;
    sourceRevision: string | null;
    model: string | null;
    limitations: string[];
  } | null;
  costCents: number | null;
  /** sha256 of the artifact's patch, computed by the run object before deciding (decide() is pure). */
  patchDigest?: string | null;
}

/** What callers may ask of a run; the object adds `now` and, where needed, randomness. */
export type RunCommand =
  | { type: "claim"; machineId: string }
  | { type: "launched"; attempt: number; machineId: string; sandboxId: string }
  | { type: "lease"; attempt: number; machineId: string }
  | { type: "launch_failed"; attempt: number; machineId: string; error: string; jitter: number }
  | { type: "stopped"; attempt: number; machineId: string; reason: string | null }
  | { type: "report"; attempt: number; seq?: number | null; phase: string | null; lines: string[]; final: FinalReport | null }
  | { type: "cancel"; by: string; reason: string | null }
  | { type: "deadline"; recoveredAtMs: number; jitter: number }
  | { type: "pause"; hold: boolean; reason: string | null }
  | { type: "quiesced" }
  | { type: "resume"; by: "operator" | "scheduler" }
  | { type: "checkpoint"; attempt: number; checkpoint: Checkpoint }
  | { type: "checkpoint_unusable"; attempt: number; machineId: string; reason: string }
  | { type: "block"; blocker: BlockerReport }
  | { type: "authorize" }
  | { type: "publish" }
  | { type: "pushed"; attempt: number; machineId: string; branch: string; headSha: string }
  /** error null: a PR creation is about to be requested; else a failed try of the PR step. */
  | { type: "publish_try"; error: string | null; retryAtMs: number }
  | { type: "published"; pr: { number: number; url: string } }
  | { type: "publish_interrupted"; reason: string }
  | { type: "publish_failed"; error: string }
  /** What recovery after an outage or a deploy observed of this run; once per recovery (epochMs). */
  | { type: "recovered"; epochMs: number; observed: string; problem: string | null }
  /** The recovery `epochMs` gave up reconciling this run after `tries` failed tries, the last with `error`. */
  | { type: "recovery_failed"; epochMs: number; tries: number; error: string };

export interface RunEventDraft {
  type: string;
  data: Record<string, unknown>;
}

export interface Hop {
  from: RunState;
  to: RunState;
  reason: string;
}

/** A hop as the run's record keeps it: when, and in which attempt. */
export interface StateChange extends Hop {
  attempt: number;
  atMs: number;
}
