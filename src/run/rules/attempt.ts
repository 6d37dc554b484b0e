// The rules of an attempt's life on a machine: the claim, the launch (or its failure), the lease, the
// sandbox's stop, and a cancel, which a runner carries out or the run ends at once
// (../shared/spec/dispatch-lifecycle.md, "Decisions").

import { queuedPublication } from "../publication";
import { isTerminal } from "../states";
import { checkAttempt, currentStep, endAttempt, refuse, type Command, type DecideConfig, type Decision, type Draft } from "./draft";
import { interruptPublication } from "./publishing";

export function decideClaim(d: Draft, command: Command<"claim">, config: DecideConfig): Decision {
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

export function decideLaunched(d: Draft, command: Command<"launched">, config: DecideConfig): Decision {
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

export function decideLease(d: Draft, command: Command<"lease">, config: DecideConfig): Decision {
  const bad = checkAttempt(d.run, command.attempt, command.machineId);
  if (bad) return bad;
  d.run.leaseExpiresAtMs = d.now + config.leaseTtlMs;
  d.touch();
  return d.done();
}

export function decideLaunchFailed(d: Draft, command: Command<"launch_failed">, config: DecideConfig): Decision {
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

export function decideStopped(d: Draft, command: Command<"stopped">): Decision {
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

export function decideCancel(d: Draft, command: Command<"cancel">): Decision {
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
