// The rules of the daemon's report: its progress, its output and, in its final report, the attempt's
// outcome, which ends the run, blocks it or starts its publication
// (../shared/spec/run-lifecycle.md, "State transitions").

import { publicationIntent, publishable } from "../publication";
import type { FinalReport, RunCommand, RunRecord } from "../types";
import { block } from "./blocking";
import { checkAttempt, clearAttemptHold, currentStep, refuse, type Command, type Decision, type Draft } from "./draft";

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

export function decideReport(d: Draft, command: Command<"report">): Decision {
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
