// The draft every rule writes, and what the rules share: the run's next state and the hops and
// events it took to get there, the refusal, the attempt check of a machine call, and the two ways
// an attempt ends without a result (requeue or failure). Pure: decide() (src/run/decide.ts) opens
// the draft, one rule of this folder fills it in.

import type { Config } from "../../config";
import type { ErrorBody } from "../../errors";
import { exponentialBackoffMs } from "../../lib/backoff";
import { awaitingPush } from "../publication";
import { canTransition, HELD_STATES, isTerminal, type RunState } from "../states";
import { deliveryFor, failureCommentBody, TRACKER_DELIVERY_EVENT } from "../ticket-requests";
import type { Hop, RunCommand, RunEventDraft, RunRecord, StateChange, Step } from "../types";

export type DecideConfig = Pick<
  Config,
  "leaseTtlMs" | "launchDeadlineMs" | "daemonSilenceMs" | "backoffBaseMs" | "backoffMaxMs" | "attemptBudget" | "publicationTriesMax" | "runStateHistoryMax"
>;

export type Decision =
  | { ok: true; run: RunRecord; hops: Hop[]; events: RunEventDraft[]; changed: boolean }
  | { ok: false; error: ErrorBody };

export class Draft {
  readonly hops: Hop[] = [];
  readonly events: RunEventDraft[] = [];
  changed = false;
  constructor(
    readonly run: RunRecord,
    readonly now: number,
    /** RUN_STATE_HISTORY_MAX: the changes of state the record keeps. */
    private readonly historyMax: number,
  ) {}

  to(state: RunState, reason: string): void {
    const from = this.run.state;
    if (!canTransition(from, state)) throw new Error(`illegal transition ${from} -> ${state}`);
    this.hops.push({ from, to: state, reason });
    this.keepInHistory({ from, to: state, reason, attempt: this.run.attempt, atMs: this.now });
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

  /**
   * The record's own state history, so a run's page never rebuilds it from a page of events (which
   * are paged, and pruned after EVENT_RETENTION_MS); bounded, counting what it lets go.
   */
  private keepInHistory(change: StateChange): void {
    const history = this.run.stateHistory;
    if (!history) return; // a run stored before records kept it: a history from here on would look whole
    history.push(change);
    const over = history.length - this.historyMax;
    if (over > 0) {
      history.splice(0, over);
      this.run.stateHistoryDropped = (this.run.stateHistoryDropped ?? 0) + over;
    }
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

export function refuse(code: ErrorBody["code"], message: string, details: Record<string, unknown> = {}): Decision {
  return { ok: false, error: { ...details, code, message } };
}

export function currentStep(run: RunRecord): Step | undefined {
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
export function endAttempt(d: Draft, config: DecideConfig, error: string, jitter: number): void {
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
export function requeue(d: Draft, reason: string, notBeforeMs: number): void {
  const run = d.run;
  d.to("queued", reason);
  clearAttemptHold(run);
  run.queuedAtMs = d.now;
  run.notBeforeMs = notBeforeMs;
}

/** Checks that a machine call names the run's current attempt and that this machine holds it. */
export function checkAttempt(run: RunRecord, attempt: number, machineId: string | null): Decision | null {
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

export type Command<T extends RunCommand["type"]> = Extract<RunCommand, { type: T }>;
export type Rule<T extends RunCommand["type"]> = (d: Draft, command: Command<T>, config: DecideConfig) => Decision;

/** A run that is not executing (paused, or queued again) holds no machine, sandbox, lease or launch deadline. */
export function clearAttemptHold(run: RunRecord): void {
  run.machineId = null;
  run.sandboxId = null;
  run.leaseExpiresAtMs = null;
  run.launchDeadlineAtMs = null;
}
