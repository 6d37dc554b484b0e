// The rules of the reaper and of recovery: what the object's alarm does to a run whose lease or
// launch deadline passed, when it may next act, and recovery's observation of an unfinished run
// (../shared/spec/dispatch-lifecycle.md, "Decisions"; ../shared/spec/run-lifecycle.md, "Completion and recovery").

import { awaitingPush } from "../publication";
import { isTerminal } from "../states";
import type { RunRecord } from "../types";
import { endAttempt, type Command, type DecideConfig, type Decision, type Draft } from "./draft";
import { interruptPublication } from "./publishing";

/**
 * The reaper, run from the object's alarm. A queued run is never reaped: the queue state is the
 * signal (dispatch-lifecycle.md, "No reaper for queued tasks"). After an outage every run gets one
 * full staleness window from `recoveredAtMs` ("A shared sweep watermark grants one full staleness window"):
 * the recorded recovery, or now while an outage may not be over (src/sweep.ts, reaperGraceFromMs).
 */
export function reap(d: Draft, config: DecideConfig, recoveredAtMs: number, jitter: number): Decision {
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
export function decideRecovered(d: Draft, command: Command<"recovered">): Decision {
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
export function decideRecoveryFailed(d: Draft, command: Command<"recovery_failed">): Decision {
  const run = d.run;
  if (isTerminal(run.state) || run.recoveredEpochMs === command.epochMs) return d.done();
  run.recoveredEpochMs = command.epochMs;
  run.recoveryFailure = { recoveryAtMs: command.epochMs, tries: command.tries, error: command.error };
  const observed = `not reconciled: the recovery passed over the run after ${command.tries} failed tries`;
  d.emit("run.recovered", { recovery_at_ms: command.epochMs, state: run.state, observed, problem: command.error, attempt: run.attempt });
  return d.done();
}
