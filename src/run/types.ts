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
  /** Where a paused or queued continuation resumes (run-lifecycle.md, "Pause and continuation"). */
  continuation: "implementing" | "publishing" | null;
  /** A durable operator hold: only an explicit resume clears it. */
  hold: boolean;
  /** The latest checkpoint of a paused implementation; absent on runs stored before checkpoints. */
  checkpoint?: Checkpoint | null;
  /** Why the run cannot continue as it stands (a checkpoint missing or unusable); cleared by a resume that can. */
  recoveryProblem?: string | null;
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
  blocker: string | null;
  artifact: Artifact | null;
  costCents: number | null;
  steps: Step[];
  createdAtMs: number;
  updatedAtMs: number;
  endedAtMs: number | null;
}

export interface FinalReport {
  outcome: "completed" | "failed";
  error: string | null;
  exitCodes: Record<string, number>;
  artifact: {
    patch: string;
    sourceRevision: string | null;
    model: string | null;
    limitations: string[];
  } | null;
  costCents: number | null;
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
  | { type: "block"; reason: string }
  | { type: "authorize" }
  | { type: "publish" }
  | { type: "published" }
  | { type: "publish_interrupted"; reason: string }
  | { type: "publish_failed"; error: string };

export interface RunEventDraft {
  type: string;
  data: Record<string, unknown>;
}

export interface Hop {
  from: RunState;
  to: RunState;
  reason: string;
}
