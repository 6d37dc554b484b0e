// The rules of pause and continuation (../shared/spec/run-lifecycle.md, "Pause and continuation"):
// a pause, the daemon's checkpoint or quiescence without one, a checkpoint the claiming runner could
// not use, and the resume that queues the run again.

import type { RunRecord } from "../types";
import { checkAttempt, clearAttemptHold, refuse, requeue, type Command, type Decision, type Draft } from "./draft";
import { interruptPublication } from "./publishing";

export function decidePause(d: Draft, command: Command<"pause">): Decision {
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
export function decideQuiesced(d: Draft): Decision {
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
export function decideCheckpoint(d: Draft, command: Command<"checkpoint">): Decision {
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
export function decideCheckpointUnusable(d: Draft, command: Command<"checkpoint_unusable">): Decision {
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
export function decideResume(d: Draft, command: Command<"resume">): Decision {
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
