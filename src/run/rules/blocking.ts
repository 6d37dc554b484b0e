// The rules of a blocked run: it waits for a person, and a human's readiness change lets it continue
// (../shared/spec/run-lifecycle.md, "Blocker and failure").

import { canTransition, HELD_STATES } from "../states";
import { blockerCommentBody, deliveryFor, TRACKER_DELIVERY_EVENT } from "../ticket-requests";
import type { BlockerReport } from "../types";
import { refuse, requeue, type Command, type Decision, type Draft } from "./draft";

export function decideBlock(d: Draft, command: Command<"block">): Decision {
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
export function block(d: Draft, blocker: BlockerReport): void {
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
export function decideAuthorize(d: Draft): Decision {
  const { run, now } = d;
  if (run.state !== "blocked") return refuse("invalid_transition", `run ${run.id} is not blocked`, { state: run.state });
  run.blocker = null;
  requeue(d, "a human authorized the run again", now);
  if (run.hold) d.to("paused", "held by an operator: Resume paused run queues it");
  else run.pauseReason = null;
  return d.done();
}
