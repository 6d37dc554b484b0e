// The rules of publication (docs/protocol.md, "Publication"): the runner's push, the pull-request
// step's tries, the confirmed pull request that completes the run, and the recoverable boundary a
// publication pauses at (../shared/spec/run-lifecycle.md, "Completion and recovery").

import { queuedPublication } from "../publication";
import { deliveryFor, TRACKER_DELIVERY_EVENT } from "../ticket-requests";
import type { RunRecord } from "../types";
import { checkAttempt, clearAttemptHold, refuse, type Command, type DecideConfig, type Decision, type Draft } from "./draft";

/**
 * A queued publication continuation whose branch is pushed goes back to publishing. Publication
 * itself starts only from the daemon's verified outcome (its final report), never from this command.
 */
export function decidePublish(d: Draft): Decision {
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
export function decidePushed(d: Draft, command: Command<"pushed">): Decision {
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
export function decidePublishTry(d: Draft, command: Command<"publish_try">, config: DecideConfig): Decision {
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
export function decidePublished(d: Draft, command: Command<"published">): Decision {
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

export function decidePublishInterrupted(d: Draft, command: Command<"publish_interrupted">): Decision {
  const bad = notPublishing(d.run);
  if (bad) return bad;
  interruptPublication(d, command.reason);
  return d.done();
}

/** Paused at the publication's recoverable boundary, continuation "publishing". */
export function interruptPublication(d: Draft, reason: string): void {
  const run = d.run;
  run.continuation = "publishing";
  // Nothing executes while paused: the machine that held the push lets go of it with its lease.
  clearAttemptHold(run);
  d.endStep("paused", reason);
  d.to("paused", reason);
  if (run.stopRequest) d.to("cancelled", "stop request carried out at a recoverable boundary");
}

export function decidePublishFailed(d: Draft, command: Command<"publish_failed">): Decision {
  const bad = notPublishing(d.run);
  if (bad) return bad;
  d.run.lastError = command.error;
  d.to("failed", command.error);
  return d.done();
}
