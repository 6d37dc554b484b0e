// The run's transition rules: a pure function (run, command, now) → next run, hops, events, or a
// refusal. No I/O: the RunObject applies the result in one transaction (../shared/STYLE.md).
// Spec: ../shared/spec/dispatch-lifecycle.md, "Decisions"; ../shared/DESIGN.md, "The run state machine".

import type { Config } from "../config";
import type { ErrorBody } from "../errors";
import { exponentialBackoffMs } from "../lib/backoff";
import { awaitingPush, publicationIntent, publishable, queuedPublication } from "./publication";
import { canTransition, HELD_STATES, isTerminal, type RunState } from "./states";
import { blockerCommentBody, deliveryFor, failureCommentBody, TRACKER_DELIVERY_EVENT } from "./ticket-requests";
import type { BlockerReport, FinalReport, Hop, RunCommand, RunEventDraft, RunRecord, Step } from "./types";

export type DecideConfig = Pick<
  Config,
  "leaseTtlMs" | "launchDeadlineMs" | "daemonSilenceMs" | "backoffBaseMs" | "backoffMaxMs" | "attemptBudget" | "publicationTriesMax"
>;

export type Decision =
  | { ok: true; run: RunRecord; hops: Hop[]; events: RunEventDraft[]; changed: boolean }
  | { ok: false; error: ErrorBody };

class Draft {
  readonly hops: Hop[] = [];
  readonly events: RunEventDraft[] = [];
  changed = false;
  constructor(
    readonly run: RunRecord,
    readonly now: number,
  ) {}

  to(state: RunState, reason: string): void {
    const from = this.run.state;
    if (!canTransition(from, state)) throw new Error(`illegal transition ${from} -> ${state}`);
    this.hops.push({ from, to: state, reason });
    this.events.push({ type: "run.state", data: { from, to: state, reason, attempt: this.run.attempt } });
    this.run.state = state;
    this.run.version += 1;
    this.changed = true;
    if (isTerminal(state)) {
      this.run.endedAtMs = this.now;
      this.run.leaseExpiresAtMs = null;
      this.run.launchDeadlineAtMs = null;
      this.endStep(state, state === "failed" ? this.run.lastError : null);
    }
    // An autopilot run's failure is told on its issue, which still carries its ready label.
    const failure = state === "failed" ? deliveryFor(this.run, "failure_comment", { body: failureCommentBody(this.run.id, this.run.lastError ?? reason) }) : null;
    if (failure) this.emit(TRACKER_DELIVERY_EVENT, { ...failure });
  }

  touch(): void {
    this.changed = true;
  }

  endStep(outcome: string, error: string | null): void {
    const step = currentStep(this.run);
    if (step && step.endedAtMs === null) {
      step.endedAtMs = this.now;
      step.outcome = outcome;
      step.error = error;
    }
  }

  emit(type: string, data: Record<string, unknown>): void {
    this.events.push({ type, data });
    this.changed = true;
  }

  done(): Decision {
    if (this.changed) this.run.updatedAtMs = this.now;
    return { ok: true, run: this.run, hops: this.hops, events: this.events, changed: this.changed };
  }
}

function refuse(code: ErrorBody["code"], message: string, details: Record<string, unknown> = {}): Decision {
  return { ok: false, error: { ...details, code, message } };
}

function currentStep(run: RunRecord): Step | undefined {
  return run.steps.find((s) => s.attempt === run.attempt);
}

/** Launch-failure backoff: exponential with equal jitter, so the delay is in [d/2, d]. */
export function backoffMs(config: DecideConfig, attempt: number, jitter: number): number {
  return exponentialBackoffMs({ baseMs: config.backoffBaseMs, maxMs: config.backoffMaxMs, jitter: "equal" }, attempt - 1, jitter);
}

/**
 * The end of an attempt that did not run to a result: a pending stop outranks every requeue and
 * failure path (dispatch-lifecycle.md, "A pending cancel outranks every requeue and failure path").
 */
function endAttempt(d: Draft, config: DecideConfig, error: string, jitter: number): void {
  const run = d.run;
  run.lastError = error;
  if (run.stopRequest) {
    d.to("cancelled", `stop request carried out: ${error}`);
    return;
  }
  if (run.state === "claimed" && run.attempt < config.attemptBudget) {
    d.endStep("requeued", error);
    requeue(d, error, d.now + backoffMs(config, run.attempt, jitter));
    return;
  }
  d.to("failed", run.state === "claimed" ? `attempt budget of ${config.attemptBudget} spent: ${error}` : error);
}

/**
 * Back to the queue, claimable from `notBeforeMs`: no machine, sandbox, lease or launch deadline
 * is left over from the attempt before, so the next claim starts clean.
 */
function requeue(d: Draft, reason: string, notBeforeMs: number): void {
  const run = d.run;
  d.to("queued", reason);
  run.machineId = null;
  run.sandboxId = null;
  run.leaseExpiresAtMs = null;
  run.launchDeadlineAtMs = null;
  run.queuedAtMs = d.now;
  run.notBeforeMs = notBeforeMs;
}

/** Checks that a machine call names the run's current attempt and that this machine holds it. */
function checkAttempt(run: RunRecord, attempt: number, machineId: string | null): Decision | null {
  if (isTerminal(run.state)) {
    return refuse("task_gone", `run ${run.id} is ${run.state}`, { state: run.state, current_attempt: run.attempt });
  }
  if (attempt < run.attempt) {
    return refuse("stale_attempt", `attempt ${attempt} is older than the current attempt ${run.attempt}`, {
      state: run.state,
      current_attempt: run.attempt,
    });
  }
  if (attempt > run.attempt || run.attempt === 0) {
    return refuse("invalid_request", `attempt ${attempt} of run ${run.id} does not exist`, {
      field: "attempt",
      current_attempt: run.attempt,
    });
  }
  if (machineId !== null && run.machineId !== null && run.machineId !== machineId) {
    return refuse("other_machine", `attempt ${attempt} is held by another machine`, { state: run.state });
  }
  if (!HELD_STATES.includes(run.state) && !awaitingPush(run)) {
    if (run.state === "queued") {
      // The step says why the attempt ended: its lease lapsed, or its launch failed.
      const why = run.steps.find((s) => s.attempt === attempt)?.error ?? "its lease lapsed";
      return refuse("lease_expired", `attempt ${attempt} is over and the run was requeued: ${why}`, {
        state: run.state,
        current_attempt: run.attempt,
      });
    }
    return refuse("invalid_transition", `run ${run.id} is ${run.state}`, { state: run.state });
  }
  return null;
}

/**
 * A daemon report whose seq was accepted before: the same seq is a retry after a lost answer and
 * answers the same success with nothing changed, even once that report ended the run; an older seq
 * is stale and refused. A report without a seq (an older daemon) is never a replay.
 */
function replayedReport(run: RunRecord, command: Extract<RunCommand, { type: "report" }>): Decision | null {
  const last = run.lastReportSeq;
  if (command.seq == null || !last || last.attempt !== command.attempt || command.attempt !== run.attempt) return null;
  if (command.seq === last.seq) return { ok: true, run, hops: [], events: [], changed: false };
  if (command.seq < last.seq) {
    return refuse("stale_report", `report ${command.seq} of attempt ${command.attempt} is older than the accepted report ${last.seq}`, {
      state: run.state,
      last_report_seq: last.seq,
    });
  }
  return null;
}

type Command<T extends RunCommand["type"]> = Extract<RunCommand, { type: T }>;
type Rule<T extends RunCommand["type"]> = (d: Draft, command: Command<T>, config: DecideConfig) => Decision;

/** One rule per command; decide() only picks the rule (dispatch-lifecycle.md, "Decisions"). */
const RULES: { [T in RunCommand["type"]]: Rule<T> } = {
  claim: decideClaim,
  launched: decideLaunched,
  lease: decideLease,
  launch_failed: decideLaunchFailed,
  stopped: decideStopped,
  report: decideReport,
  cancel: decideCancel,
  deadline: (d, command, config) => reap(d, config, command.recoveredAtMs, command.jitter),
  pause: decidePause,
  quiesced: decideQuiesced,
  resume: decideResume,
  checkpoint: decideCheckpoint,
  checkpoint_unusable: decideCheckpointUnusable,
  block: decideBlock,
  authorize: decideAuthorize,
  publish: decidePublish,
  pushed: decidePushed,
  publish_try: decidePublishTry,
  published: decidePublished,
  publish_interrupted: decidePublishInterrupted,
  publish_failed: decidePublishFailed,
  recovered: decideRecovered,
  recovery_failed: decideRecoveryFailed,
};

export function decide(input: RunRecord, command: RunCommand, now: number, config: DecideConfig): Decision {
  const d = new Draft(structuredClone(input), now);
  const rule = RULES[command.type] as Rule<RunCommand["type"]>;
  return rule(d, command, config);
}

function decideClaim(d: Draft, command: Command<"claim">, config: DecideConfig): Decision {
  const { run, now } = d;
  if (run.state !== "queued") {
    return refuse(isTerminal(run.state) ? "task_gone" : "invalid_transition", `run ${run.id} is ${run.state}, not queued`, {
      state: run.state,
    });
  }
  if (run.hold) return refuse("invalid_transition", `run ${run.id} is held by an operator`, { state: run.state });
  if (queuedPublication(run) === "pushed") {
    return refuse("invalid_transition", `run ${run.id} is a publication whose branch is pushed: Docket creates its pull request, no runner`, { state: run.state });
  }
  if (run.notBeforeMs > now) {
    return refuse("invalid_transition", `run ${run.id} is backing off until ${run.notBeforeMs}`, {
      state: run.state,
      not_before_ms: run.notBeforeMs,
    });
  }
  run.attempt += 1;
  run.machineId = command.machineId;
  run.sandboxId = null;
  run.claimedAtMs = now;
  run.launchedAtMs = null;
  run.lastReportAtMs = null;
  run.leaseExpiresAtMs = now + config.leaseTtlMs;
  run.launchDeadlineAtMs = now + config.launchDeadlineMs;
  run.steps.push({
    attempt: run.attempt,
    machineId: command.machineId,
    claimedAtMs: now,
    launchedAtMs: null,
    sandboxId: null,
    endedAtMs: null,
    outcome: null,
    error: null,
  });
  if (queuedPublication(run) === "push") {
    // A push-only job: the runner applies the stored patch and pushes; no agent runs.
    run.launchDeadlineAtMs = null;
    d.to("publishing", `publication continuation claimed by machine ${command.machineId} to push`);
    return d.done();
  }
  d.to("claimed", `claimed by machine ${command.machineId}`);
  return d.done();
}

function decideLaunched(d: Draft, command: Command<"launched">, config: DecideConfig): Decision {
  const { run, now } = d;
  const bad = checkAttempt(run, command.attempt, command.machineId);
  if (bad) return bad;
  if (run.state !== "claimed") {
    if (run.sandboxId === command.sandboxId) return d.done(); // a replayed launched call
    if (run.sandboxId === null) {
      // The daemon's first report proved the launch before this call arrived: record the sandbox.
      run.sandboxId = command.sandboxId;
      const step = currentStep(run);
      if (step) step.sandboxId = command.sandboxId;
      d.touch();
      return d.done();
    }
    return refuse("invalid_transition", `attempt ${run.attempt} was already launched`, { state: run.state });
  }
  run.sandboxId = command.sandboxId;
  run.launchedAtMs = now;
  run.launchDeadlineAtMs = null;
  run.leaseExpiresAtMs = now + config.leaseTtlMs;
  const step = currentStep(run);
  if (step) {
    step.launchedAtMs = now;
    step.sandboxId = command.sandboxId;
  }
  d.to("implementing", `launched in sandbox ${command.sandboxId}`);
  return d.done();
}

function decideLease(d: Draft, command: Command<"lease">, config: DecideConfig): Decision {
  const bad = checkAttempt(d.run, command.attempt, command.machineId);
  if (bad) return bad;
  d.run.leaseExpiresAtMs = d.now + config.leaseTtlMs;
  d.touch();
  return d.done();
}

function decideLaunchFailed(d: Draft, command: Command<"launch_failed">, config: DecideConfig): Decision {
  const run = d.run;
  const bad = checkAttempt(run, command.attempt, command.machineId);
  if (bad) return bad;
  if (run.state !== "claimed") {
    return refuse("invalid_transition", `attempt ${run.attempt} was launched; report its end instead`, {
      state: run.state,
    });
  }
  endAttempt(d, config, `launch failed: ${command.error}`, command.jitter);
  return d.done();
}

function decideStopped(d: Draft, command: Command<"stopped">): Decision {
  const run = d.run;
  const bad = checkAttempt(run, command.attempt, command.machineId);
  if (bad) return bad;
  const reason = command.reason ?? "sandbox stopped";
  if (run.stopRequest) {
    d.to("cancelled", "stop request carried out by the runner");
  } else if (run.state === "pausing") {
    // Only a stored checkpoint pauses a run: a sandbox that ended without one lost the work's state.
    run.lastError = `the sandbox stopped while pausing without a checkpoint: ${reason}`;
    d.to("failed", run.lastError);
  } else if (run.state === "publishing") {
    // The push did not happen: the publication waits at its recoverable boundary.
    interruptPublication(d, `publish_interrupted: the push was not made: ${reason}`);
  } else {
    run.lastError = reason;
    d.to("failed", reason);
  }
  return d.done();
}

function decideReport(d: Draft, command: Command<"report">): Decision {
  const { run, now } = d;
  const replayed = replayedReport(run, command);
  if (replayed) return replayed;
  const bad = checkAttempt(run, command.attempt, null);
  if (bad) return bad;
  if (command.final && run.state === "publishing") {
    // The attempt's outcome was accepted and is being published: another end cannot replace it.
    return refuse("invalid_transition", `run ${run.id} is publishing: its attempt's outcome was already accepted`, { state: run.state });
  }
  run.lastReportAtMs = now;
  if (command.seq != null) run.lastReportSeq = { attempt: run.attempt, seq: command.seq };
  d.touch();
  if (run.state === "claimed") {
    // The daemon can speak before the runner's launched call arrives; its report proves the launch.
    run.launchedAtMs = now;
    run.launchDeadlineAtMs = null;
    const step = currentStep(run);
    if (step) step.launchedAtMs = now;
    d.to("implementing", "the daemon reported before the launched call");
  }
  if (command.phase && command.phase !== run.phase) {
    run.phase = command.phase;
    d.emit("run.phase", { phase: command.phase, attempt: run.attempt });
  }
  if (command.lines.length > 0) d.emit("run.output", { lines: command.lines, attempt: run.attempt });
  if (command.final) endByFinalReport(d, command.final);
  return d.done();
}

/** The daemon's final report: its cost and artifact, then the run's end (a pending stop outranks the outcome). */
function endByFinalReport(d: Draft, final: FinalReport): void {
  const run = d.run;
  run.costCents = final.costCents;
  if (final.artifact) {
    run.artifact = {
      ...final.artifact,
      exitCodes: final.exitCodes,
      empty: final.artifact.patch.trim().length === 0,
    };
    d.emit("run.artifact", { attempt: run.attempt, empty: run.artifact.empty, cost_cents: final.costCents });
  }
  if (run.stopRequest) {
    d.to("cancelled", "stop request pending when the daemon finished");
  } else if (final.outcome === "blocked" && final.blocker) {
    block(d, final.blocker);
  } else if (run.state === "implementing" && publishable(run, final)) {
    // The intent is stored with the transition, before any push or pull request.
    run.publication = publicationIntent(run, final, d.now);
    d.to("publishing", "verified outcome accepted for publication");
    d.emit("run.publication", { step: "intent", branch: run.publication.branch, source_revision: run.publication.sourceRevision, patch_digest: run.publication.patchDigest, attempt: run.attempt });
  } else if (final.outcome === "completed" && run.state === "implementing" && run.ticketKey) {
    // An autopilot run is completed only by its pull request (../shared/spec/run-lifecycle.md, "State
    // transitions"): an outcome without a change has nothing to publish.
    run.lastError = "the agent reported completed without a change: nothing to publish as a pull request";
    d.to("failed", run.lastError);
  } else if (final.outcome === "completed" && run.state === "implementing") {
    d.to("completed", "the daemon reported a result for review");
  } else if (final.outcome === "completed") {
    d.endStep("paused", null);
    run.recoveryProblem = "the agent finished while pausing and no checkpoint was stored";
    clearAttemptHold(run);
    d.to("paused", "the daemon finished while pausing");
  } else {
    run.lastError = final.error ?? "the agent failed";
    d.to("failed", run.lastError);
  }
}

function decideCancel(d: Draft, command: Command<"cancel">): Decision {
  const { run, now } = d;
  if (run.state === "cancelled") return d.done();
  if (isTerminal(run.state)) return refuse("task_gone", `run ${run.id} is ${run.state}`, { state: run.state });
  if (run.state === "queued" || run.state === "paused" || run.state === "blocked") {
    run.stopRequest = { requestedAtMs: now, reason: command.reason, by: command.by };
    d.to("cancelled", command.reason ? `cancelled: ${command.reason}` : "cancelled");
    return d.done();
  }
  if (run.state === "publishing") {
    // The table has no publishing -> cancelled: an accepted stop could not always end cancelled.
    return refuse("invalid_transition", `run ${run.id} is publishing: cancel it once it is paused or has ended`, { state: run.state });
  }
  if (!run.stopRequest) {
    run.stopRequest = { requestedAtMs: now, reason: command.reason, by: command.by };
    run.version += 1;
    d.emit("run.stop_requested", { by: command.by, reason: command.reason, attempt: run.attempt });
  }
  return d.done();
}

function decidePause(d: Draft, command: Command<"pause">): Decision {
  const run = d.run;
  const reason = command.reason ?? null;
  if (run.state === "queued") {
    setPause(d, command.hold, reason);
    d.to("paused", reason ?? "paused before a runner took it");
  } else if (run.state === "implementing") {
    setPause(d, command.hold, reason);
    run.continuation = "implementing";
    d.to("pausing", reason ?? "pause requested");
    d.emit("run.pause_requested", { hold: command.hold, reason, attempt: run.attempt });
  } else if (run.state === "publishing") {
    // A recoverable boundary (run-lifecycle.md, "Pause and continuation"): the pull-request step
    // always looks the branch's PR up before creating one, so a request in flight at the pause is
    // reconciled when the continuation publishes again, and a push not yet reported is made again.
    setPause(d, command.hold, reason);
    interruptPublication(d, reason ?? "publication paused");
  } else if ((run.state === "pausing" || run.state === "paused") && command.hold && !run.hold) {
    // An operator's stop of a run the scheduler already paused: the hold is what it adds.
    setPause(d, true, reason);
    d.touch();
  } else if (run.state === "pausing" || run.state === "paused") {
    return d.done(); // asked again: nothing more to do
  } else {
    return refuse("invalid_transition", `a ${run.state} run cannot be paused`, { state: run.state });
  }
  return d.done();
}

function setPause(d: Draft, hold: boolean, reason: string | null): void {
  if (hold) d.run.hold = true;
  d.run.pauseReason = reason ?? (hold ? "stopped at a checkpoint by an operator" : "paused by the scheduler");
}

/** Quiescence without a checkpoint (no daemon to upload one): the run is paused, its work state unknown. */
function decideQuiesced(d: Draft): Decision {
  const run = d.run;
  if (run.state !== "pausing") return refuse("invalid_transition", `run ${run.id} is not pausing`, { state: run.state });
  d.endStep("paused", null);
  if (!run.checkpoint || run.checkpoint.attempt !== run.attempt) run.recoveryProblem = "execution stopped without a checkpoint";
  d.to("paused", "execution quiescent");
  if (run.stopRequest) d.to("cancelled", "stop request carried out at a checkpoint");
  return d.done();
}

/**
 * The daemon's checkpoint: the only way a pausing run becomes paused with its work kept. Its patch
 * and session are written by the object in the same transaction (durable-objects/checkpoint-store.ts).
 */
function decideCheckpoint(d: Draft, command: Command<"checkpoint">): Decision {
  const run = d.run;
  // A retry after a lost answer: this attempt's checkpoint is stored and paused the run (or carried
  // out its stop request). It answers the same success and changes nothing, as a replayed report does.
  const stored = run.checkpoint?.attempt === command.attempt && command.attempt === run.attempt;
  if (stored && (run.state === "paused" || run.state === "cancelled")) return d.done();
  const bad = checkAttempt(run, command.attempt, null);
  if (bad) return bad;
  if (run.state !== "pausing") {
    return refuse("invalid_transition", `run ${run.id} is ${run.state}: only a pausing run takes a checkpoint`, { state: run.state });
  }
  run.checkpoint = command.checkpoint;
  run.recoveryProblem = null;
  run.continuation = "implementing";
  clearAttemptHold(run);
  d.endStep("paused", null);
  d.emit("run.checkpoint", checkpointEventData(command.checkpoint));
  d.to("paused", "checkpoint stored; execution quiescent");
  if (run.stopRequest) d.to("cancelled", "stop request carried out at a checkpoint");
  return d.done();
}

function checkpointEventData(c: NonNullable<RunRecord["checkpoint"]>): Record<string, unknown> {
  return { attempt: c.attempt, session_id: c.sessionId, last_phase: c.lastPhase, patch_chars: c.patchChars, note: c.note };
}

/**
 * The claiming runner could not verify the checkpoint (source revision gone, patch does not apply,
 * session missing): the continuation goes back to paused with the hold set and the problem recorded,
 * never started over on a guess (run-lifecycle.md, "Pause and continuation").
 */
function decideCheckpointUnusable(d: Draft, command: Command<"checkpoint_unusable">): Decision {
  const run = d.run;
  const bad = checkAttempt(run, command.attempt, command.machineId);
  if (bad) return bad;
  if (run.state !== "claimed") {
    return refuse("invalid_transition", `attempt ${run.attempt} was already launched; a checkpoint is verified before launch`, { state: run.state });
  }
  run.hold = true;
  run.recoveryProblem = `checkpoint unusable: ${command.reason}`;
  run.pauseReason = run.recoveryProblem;
  clearAttemptHold(run);
  d.endStep("checkpoint_unusable", command.reason);
  d.to("paused", run.recoveryProblem);
  if (run.stopRequest) d.to("cancelled", "stop request carried out at a checkpoint");
  return d.done();
}

/** A paused run holds no machine, sandbox or lease. */
function clearAttemptHold(run: RunRecord): void {
  run.machineId = null;
  run.sandboxId = null;
  run.leaseExpiresAtMs = null;
  run.launchDeadlineAtMs = null;
}

/**
 * Whether the stored checkpoint covers the last attempt that executed (its sandbox launched): true
 * for a run that never executed, which has nothing to restore, and for one whose last execution
 * ended blocked, which a human's authorization lets continue as any authorized blocked run does.
 */
export function checkpointCovers(run: RunRecord): boolean {
  const launched = run.steps.filter((s) => s.launchedAtMs !== null);
  if (launched.length === 0) return true;
  const last = launched[launched.length - 1];
  return last.outcome === "blocked" || (!!run.checkpoint && run.checkpoint.attempt >= last.attempt);
}

/**
 * Back to ordinary eligibility. Only an operator's resume clears the hold (run-lifecycle.md, "Pause
 * and continuation": not a scheduler resume, a budget reset or a restart). A run that executed and
 * has no checkpoint is a recovery problem, never a silent restart.
 */
function decideResume(d: Draft, command: Command<"resume">): Decision {
  const { run, now } = d;
  if (run.state !== "paused") return refuse("invalid_transition", `run ${run.id} is ${run.state}, not paused`, { state: run.state });
  if (run.hold && command.by !== "operator") {
    return refuse("invalid_transition", `run ${run.id} is held by an operator: only Resume paused run clears it`, { state: run.state, hold: true });
  }
  if (run.continuation === "implementing" && !checkpointCovers(run)) {
    const problem = run.recoveryProblem ?? "the run executed and no checkpoint was stored";
    return refuse("checkpoint_missing", `run ${run.id} cannot resume: ${problem}`, { state: run.state, recovery_problem: problem });
  }
  if (command.by === "operator") run.hold = false;
  run.recoveryProblem = null;
  run.pauseReason = null;
  requeue(d, run.continuation ? `continuation of ${run.continuation}` : "resumed", now);
  return d.done();
}

function decideBlock(d: Draft, command: Command<"block">): Decision {
  const run = d.run;
  if (!canTransition(run.state, "blocked")) {
    return refuse("invalid_transition", `a ${run.state} run cannot be blocked`, { state: run.state });
  }
  if (run.stopRequest) {
    // A pending stop outranks the blocker: the run ends cancelled, never waits for a human.
    d.to("cancelled", `stop request carried out instead of blocking: ${command.blocker.summary}`);
    return d.done();
  }
  block(d, command.blocker);
  return d.done();
}

/**
 * The run waits for a person (../shared/spec/run-lifecycle.md, "Blocker and failure"): the step
 * ends, the blocker is stored, and a run of autopilot asks for the tracker comment in the same
 * transaction. Leaving the held states releases the slot: execution has stopped.
 */
function block(d: Draft, blocker: BlockerReport): void {
  const run = d.run;
  if (HELD_STATES.includes(run.state)) d.endStep("blocked", blocker.summary);
  run.blocker = { ...blocker, attempt: run.attempt, atMs: d.now };
  run.leaseExpiresAtMs = null;
  run.launchDeadlineAtMs = null;
  d.to("blocked", `blocked: ${blocker.summary}`);
  const delivery = deliveryFor(run, "blocker_comment", { body: blockerCommentBody(run.id, blocker), attempt: run.attempt });
  if (delivery) d.emit(TRACKER_DELIVERY_EVENT, { ...delivery });
}

/**
 * A human's readiness change lets a blocked run continue. It is not an operator's resume: a run
 * stopped at a checkpoint before it blocked keeps its hold and waits paused, queued again only by
 * Resume paused run (run-lifecycle.md, "Pause and continuation": only that clears the hold).
 */
function decideAuthorize(d: Draft): Decision {
  const { run, now } = d;
  if (run.state !== "blocked") return refuse("invalid_transition", `run ${run.id} is not blocked`, { state: run.state });
  run.blocker = null;
  requeue(d, "a human authorized the run again", now);
  if (run.hold) d.to("paused", "held by an operator: Resume paused run queues it");
  else run.pauseReason = null;
  return d.done();
}

/**
 * A queued publication continuation whose branch is pushed goes back to publishing. Publication
 * itself starts only from the daemon's verified outcome (its final report), never from this command.
 */
function decidePublish(d: Draft): Decision {
  const run = d.run;
  if (queuedPublication(run) === "pushed") {
    // A resumed publication: its PR step is due at once, with no coding turn before it.
    if (run.publication) run.publication.nextTryAtMs = d.now;
    d.to("publishing", "publication continuation reconciled");
  } else {
    return refuse("invalid_transition", `a ${run.state} run cannot publish`, { state: run.state });
  }
  return d.done();
}

/** The three ends of a publication apply only to a publishing run. */
function notPublishing(run: RunRecord): Decision | null {
  return run.state === "publishing" ? null : refuse("invalid_transition", `run ${run.id} is not publishing`, { state: run.state });
}

/**
 * The runner's push of the publication branch (docs/protocol.md, "Publication"). A replay of the
 * recorded push answers the same success; otherwise only the attempt's machine may report it.
 */
function decidePushed(d: Draft, command: Command<"pushed">): Decision {
  const run = d.run;
  const p = run.publication;
  if (p && p.headSha !== null && p.headSha === command.headSha && p.branch === command.branch && command.attempt === run.attempt) return d.done();
  const bad = checkAttempt(run, command.attempt, command.machineId);
  if (bad) return bad;
  if (run.state !== "publishing" || !p) return refuse("invalid_transition", `run ${run.id} is ${run.state}, not awaiting a push`, { state: run.state });
  if (command.branch !== p.branch) {
    return refuse("invalid_request", `the publication branch of run ${run.id} is ${p.branch}, not ${command.branch}`, { field: "branch" });
  }
  p.headSha = command.headSha;
  p.pushedAtMs = d.now;
  p.nextTryAtMs = d.now;
  run.leaseExpiresAtMs = null;
  d.endStep("pushed", null);
  d.emit("run.publication", { step: "pushed", branch: p.branch, head_sha: p.headSha, attempt: run.attempt });
  return d.done();
}

/**
 * A PR step that did not finish: recorded before the next try, which waits until `retryAtMs`. The
 * PUBLICATION_TRIES_MAXth failure ends the run failed with the reason (publish_failed).
 */
function decidePublishTry(d: Draft, command: Command<"publish_try">, config: DecideConfig): Decision {
  const run = d.run;
  const bad = notPublishing(run);
  if (bad) return bad;
  const p = run.publication;
  if (!p || p.headSha === null || p.pr !== null) return refuse("invalid_transition", `run ${run.id} has no pushed publication awaiting its pull request`, { state: run.state });
  p.nextTryAtMs = command.retryAtMs;
  if (command.error === null) {
    p.createRequestedAtMs = d.now;
    d.touch();
    return d.done();
  }
  p.tries += 1;
  p.lastError = command.error;
  if (p.tries >= config.publicationTriesMax) {
    run.lastError = `publish_failed: ${command.error} (after ${p.tries} tries)`;
    d.to("failed", run.lastError);
    return d.done();
  }
  d.emit("run.publication", { step: "retry", error: command.error, tries: p.tries, next_try_at_ms: p.nextTryAtMs, attempt: run.attempt });
  return d.done();
}

/** The PR is stored and the run completes in one step; the tracker deliveries go out with it. */
function decidePublished(d: Draft, command: Command<"published">): Decision {
  const run = d.run;
  const bad = notPublishing(run);
  if (bad) return bad;
  const p = run.publication;
  if (!p || p.headSha === null) return refuse("invalid_transition", `run ${run.id} has no pushed publication`, { state: run.state });
  p.pr = { number: command.pr.number, url: command.pr.url, confirmedAtMs: d.now };
  p.lastError = null;
  p.nextTryAtMs = null;
  d.to("completed", `pull request #${command.pr.number} confirmed`);
  for (const kind of ["review_label", "pr_comment"] as const) {
    const delivery = deliveryFor(run, kind, { pr_url: command.pr.url, pr_number: command.pr.number });
    if (delivery) d.emit(TRACKER_DELIVERY_EVENT, { ...delivery });
  }
  return d.done();
}

function decidePublishInterrupted(d: Draft, command: Command<"publish_interrupted">): Decision {
  const bad = notPublishing(d.run);
  if (bad) return bad;
  interruptPublication(d, command.reason);
  return d.done();
}

/** Paused at the publication's recoverable boundary, continuation "publishing". */
function interruptPublication(d: Draft, reason: string): void {
  const run = d.run;
  run.continuation = "publishing";
  // Nothing executes while paused: the machine that held the push lets go of it with its lease.
  clearAttemptHold(run);
  d.endStep("paused", reason);
  d.to("paused", reason);
  if (run.stopRequest) d.to("cancelled", "stop request carried out at a recoverable boundary");
}

function decidePublishFailed(d: Draft, command: Command<"publish_failed">): Decision {
  const bad = notPublishing(d.run);
  if (bad) return bad;
  d.run.lastError = command.error;
  d.to("failed", command.error);
  return d.done();
}

/**
 * The reaper, run from the object's alarm. A queued run is never reaped: the queue state is the
 * signal (dispatch-lifecycle.md, "No reaper for queued tasks"). After an outage every run gets one
 * full staleness window from `recoveredAtMs` ("A shared sweep watermark grants one full staleness window"):
 * the recorded recovery, or now while an outage may not be over (src/sweep.ts, reaperGraceFromMs).
 */
function reap(d: Draft, config: DecideConfig, recoveredAtMs: number, jitter: number): Decision {
  const run = d.run;
  const deadline = reapDeadline(run, config, recoveredAtMs);
  if (deadline === null || d.now < deadline) return d.done();
  if (run.state === "claimed") {
    const lapsed = run.leaseExpiresAtMs !== null && d.now >= run.leaseExpiresAtMs;
    endAttempt(d, config, lapsed ? "the claim's lease lapsed before launch" : "not launched within the launch deadline", jitter);
  } else if (run.state === "publishing") {
    interruptPublication(d, "publish_interrupted: the lease lapsed before the push was reported");
  } else if (run.stopRequest) {
    // The reaper delivers a cancel no runner can (dispatch-lifecycle.md, "Decisions").
    d.to("cancelled", "lease gone; the reaper carried out the stop request");
  } else {
    run.lastError = `lease gone and the daemon silent for ${config.daemonSilenceMs} ms`;
    d.to("failed", run.lastError);
  }
  return d.done();
}

/** When the reaper may act on this run next, or null when it never will in this state. */
export function reapDeadline(run: RunRecord, config: DecideConfig, recoveredAtMs: number): number | null {
  const leaseGrace = recoveredAtMs + config.leaseTtlMs;
  if (run.state === "claimed") {
    const earliest = Math.min(run.leaseExpiresAtMs ?? Infinity, run.launchDeadlineAtMs ?? Infinity);
    return Number.isFinite(earliest) ? Math.max(earliest, leaseGrace) : null;
  }
  if (awaitingPush(run)) return Math.max(run.leaseExpiresAtMs ?? 0, leaseGrace);
  if (run.state === "implementing" || run.state === "pausing") {
    const leaseGone = Math.max(run.leaseExpiresAtMs ?? 0, leaseGrace);
    if (run.stopRequest) return leaseGone;
    const lastHeard = Math.max(run.launchedAtMs ?? 0, run.lastReportAtMs ?? 0);
    return Math.max(leaseGone, lastHeard + config.daemonSilenceMs, recoveredAtMs + config.daemonSilenceMs);
  }
  return null;
}

/**
 * Recovery's observation of an unfinished run, persisted once per recovery (run-lifecycle.md,
 * "Completion and recovery": "Persist the observed recovery result and resume only from a verified
 * usable state"). A paused run whose stored checkpoint did not verify gets its recovery problem, so
 * a resume is refused (checkpoint_missing) instead of restarting silently.
 */
function decideRecovered(d: Draft, command: Command<"recovered">): Decision {
  const run = d.run;
  if (isTerminal(run.state) || run.recoveredEpochMs === command.epochMs) return d.done();
  run.recoveredEpochMs = command.epochMs;
  run.recoveryFailure = null;
  if (command.problem && run.state === "paused") {
    // An unusable checkpoint is no checkpoint: a resume is refused (checkpoint_missing) with this problem.
    run.recoveryProblem = command.problem;
    run.checkpoint = null;
  }
  d.emit("run.recovered", { recovery_at_ms: command.epochMs, state: run.state, observed: command.observed, problem: command.problem, attempt: run.attempt });
  return d.done();
}

/**
 * A recovery that kept failing to reconcile this run passed over it (src/recovery.ts): the failure
 * is the run's observed recovery result, shown as its recovery_failure. Nothing else changes: the
 * run's own deadlines still hold, and its checkpoint was not found wanting, only not read.
 */
function decideRecoveryFailed(d: Draft, command: Command<"recovery_failed">): Decision {
  const run = d.run;
  if (isTerminal(run.state) || run.recoveredEpochMs === command.epochMs) return d.done();
  run.recoveredEpochMs = command.epochMs;
  run.recoveryFailure = { recoveryAtMs: command.epochMs, tries: command.tries, error: command.error };
  const observed = `not reconciled: the recovery passed over the run after ${command.tries} failed tries`;
  d.emit("run.recovered", { recovery_at_ms: command.epochMs, state: run.state, observed, problem: command.error, attempt: run.attempt });
  return d.done();
}
