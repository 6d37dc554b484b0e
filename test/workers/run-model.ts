// A simple, independent model of one run as a user and a runner see it through the HTTP API
// (../shared/DESIGN.md, "The run state machine" and "Invariants"; docs/protocol.md). Given the
// model's state and a call, it predicts every answer Docket may give (status, code) and the run
// each answer leaves behind. Time only matters near a deadline: a call made in [t0, t1] may see
// the deadline passed or not, so both answers are allowed there. No I/O: model-harness.ts drives it
// over HTTP, model-decide.test.ts compares it with decide().

import { canTransition, isRunState, isTerminal as isTerminalState } from "../../src/run/states";

// The state table is the one the run objects use (src/run/states.ts, DESIGN.md's table as data):
// the model predicts answers, the table says which hops are permitted.
export const isTerminal = (state: string) => isRunState(state) && isTerminalState(state);
export const permitted = (from: string, to: string) => isRunState(from) && isRunState(to) && canTransition(from, to);

export interface Timing {
  leaseTtlMs: number;
  launchDeadlineMs: number;
  daemonSilenceMs: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  attemptBudget: number;
  /** Publication's PR step: its tries and the wait between them (config defaults when absent). */
  publicationTriesMax?: number;
  publicationRetryMs?: number;
}

/** What the model knows of a run. Times are the run's own clock (ageRun moves them back). */
export interface ModelRun {
  state: string;
  attempt: number;
  /** The machine holding the current attempt; null once a lapsed or failed claim was requeued. */
  holder: string | null;
  sandbox: string | null;
  phase: string | null;
  stop: boolean;
  leaseAt: number | null;
  launchDeadlineAt: number | null;
  launchedAt: number | null;
  lastReportAt: number | null;
  notBefore: number;
  /** The last report accepted with a seq, and its attempt (absent: none yet, or reports without seq). */
  lastReportSeq?: { attempt: number; seq: number } | null;
  /** Pause and resume (docs/protocol.md, "Pause and resume"): the operator hold, the stored checkpoint's attempt, the last attempt launched. */
  hold?: boolean;
  checkpointAttempt?: number | null;
  launchedMax?: number;
  /** The attempt whose execution ended blocked: a human's authorization lets it continue, with nothing to restore. */
  blockedAttempt?: number;
  /** Publication (docs/protocol.md, "Publication"): an autopilot run, its publication's step, and whether the code host's branch head differs from the pushed one. */
  ticket?: boolean;
  publication?: "intent" | "pushed" | null;
  hostMoved?: boolean;
  /** The PR step's failed tries, when the next is due (the run's clock), and how many more reads of the code host fail. */
  prTries?: number;
  prRetryAt?: number | null;
  hostFailures?: number;
}

export type ReportKind = "phase" | "lines" | "completed" | "failed" | "blocked" | "empty";

/** A call with every choice resolved: which machine, which attempt, which token. */
export type Call =
  /** `stale`: the run's queue row was made to say queued first, whatever the run's state (a claim its run object refuses). */
  | { kind: "claim"; machine: string; stale?: boolean }
  | { kind: "launched"; machine: string; attempt: number; sandbox: string }
  | { kind: "lease"; machine: string; attempt: number }
  | { kind: "launch_failed"; machine: string; attempt: number }
  | { kind: "stopped"; machine: string; attempt: number }
  /** `tokenAttempt` null: a token this run never issued (a made-up one, or another run's). */
  | { kind: "report"; tokenAttempt: number | null; token: string; report: ReportKind; phase: string | null; seq?: number }
  | { kind: "cancel" }
  /** The run's clock moves `ageMs` forward, then its alarm fires. */
  | { kind: "alarm"; ageMs: number }
  | { kind: "dispatch_again"; samePayload: boolean }
  | { kind: "redeliver" }
  /** A human readiness change authorizes a blocked run again (the ticket calls the run object). */
  | { kind: "authorize" }
  | PauseCall
  | PublishCall;

/** The runner's publication calls: its push credential, and its push of `own` branch or another (the code host's head `moved` by someone else, or not). */
export type PublishCall =
  | { kind: "push_credential"; machine: string; attempt: number }
  | { kind: "pushed"; machine: string; attempt: number; branch: "own" | "other"; moved: boolean; hostDown?: boolean };

/** The pause and resume calls: an operator's pause and resume, the daemon's checkpoint, the runner's unusable checkpoint. */
export type PauseCall =
  | { kind: "pause" }
  | { kind: "resume" }
  | { kind: "checkpoint"; tokenAttempt: number | null; token: string; attempt: number }
  | { kind: "checkpoint_unusable"; machine: string; attempt: number };

/** How much of the run view an answer may change: nothing, the lease only, or anything. */
export type Effect = "none" | "lease" | "change";

export interface Outcome {
  status: number;
  code: string | null;
  next: ModelRun;
  effect: Effect;
  /** The answer set the lease to now + TTL. */
  setsLease?: boolean;
  /** The answer requeued attempt N with backoff: not-before in now + [d/2, d]. */
  backoffFor?: number;
  /** The attempt went from claimed to implementing (launched, or proved by a report). */
  launches?: boolean;
  /** The reaper acted in the background right after the answer (a deadline had passed). */
  background?: boolean;
  /** The run as the answer itself shows it (before a background reap). */
  answer?: ModelRun;
  why: string;
}

const HELD = ["claimed", "implementing", "pausing"];

/** A publishing run whose push is not reported: the attempt's machine still holds it. */
const awaitingPush = (m: ModelRun) => m.state === "publishing" && m.publication === "intent" && m.holder !== null;

export function newRun(createdAtMs: number): ModelRun {
  return {
    state: "queued",
    attempt: 0,
    holder: null,
    sandbox: null,
    phase: null,
    stop: false,
    leaseAt: null,
    launchDeadlineAt: null,
    launchedAt: null,
    lastReportAt: null,
    notBefore: createdAtMs,
  };
}

/** The backoff before attempt N+1 after attempt N ended without launching: [d/2, d]. */
export function backoffRange(t: Timing, attempt: number): [number, number] {
  const d = Math.min(t.backoffMaxMs, t.backoffBaseMs * 2 ** Math.max(0, attempt - 1));
  return [Math.floor(d / 2), Math.ceil(d)];
}

/** When the reaper may end the current attempt, or null when it never acts in this state. */
export function reapAt(m: ModelRun, t: Timing): number | null {
  // A pushed publication's PR step is due at its next try; a resumed one's return to it at once (0: already due).
  if (m.publication === "pushed" && m.state === "queued") return 0;
  if (m.publication === "pushed" && m.state === "publishing") return m.prRetryAt ?? 0;
  if (awaitingPush(m)) return m.leaseAt ?? 0;
  if (m.state === "claimed") return Math.min(m.leaseAt ?? Infinity, m.launchDeadlineAt ?? Infinity);
  if (m.state === "implementing" || m.state === "pausing") {
    const leaseGone = m.leaseAt ?? 0;
    if (m.stop) return leaseGone;
    const lastHeard = Math.max(m.launchedAt ?? 0, m.lastReportAt ?? 0);
    return Math.max(leaseGone, lastHeard + t.daemonSilenceMs);
  }
  return null;
}

/** The run after the reaper acted: a pending stop always ends it cancelled (DESIGN.md, invariant 3). */
export function reaped(m: ModelRun, t: Timing, now: number): Outcome["next"] & { backoffFor?: number } {
  const next = { ...m };
  if (m.publication === "pushed" && m.state === "queued") return { ...next, state: "publishing", prRetryAt: now };
  if (m.publication === "pushed" && m.state === "publishing") return prStep(m, t, now);
  if (awaitingPush(m)) return pausedAt(m);
  if (m.stop) return { ...next, state: "cancelled", leaseAt: null, launchDeadlineAt: null };
  if (m.state === "claimed" && m.attempt < t.attemptBudget) {
    return { ...next, state: "queued", holder: null, sandbox: null, leaseAt: null, launchDeadlineAt: null, notBefore: now, backoffFor: m.attempt };
  }
  return { ...next, state: "failed", leaseAt: null, launchDeadlineAt: null };
}

function moved(m: ModelRun, ms: number): ModelRun {
  const shift = (v: number | null) => (v === null ? null : v - ms);
  return {
    ...m,
    leaseAt: shift(m.leaseAt),
    launchDeadlineAt: shift(m.launchDeadlineAt),
    launchedAt: shift(m.launchedAt),
    lastReportAt: shift(m.lastReportAt),
    notBefore: m.notBefore - ms,
    prRetryAt: m.prRetryAt === undefined ? undefined : shift(m.prRetryAt),
  };
}

function refused(m: ModelRun, status: number, code: string, why: string): Outcome {
  return { status, code, next: m, effect: "none", why };
}

/** The checks every attempt call passes first (docs/protocol.md, "Runner protocol"). */
function attemptRefusal(m: ModelRun, attempt: number, machine: string | null): Outcome | null {
  if (isTerminal(m.state)) return refused(m, 410, "task_gone", `the run is ${m.state}`);
  if (attempt < m.attempt) return refused(m, 409, "stale_attempt", `attempt ${attempt} < current ${m.attempt}`);
  if (attempt > m.attempt || m.attempt === 0) return refused(m, 400, "invalid_request", `attempt ${attempt} does not exist`);
  if (machine !== null && m.holder !== null && m.holder !== machine) return refused(m, 409, "other_machine", "another machine holds it");
  if (m.state === "queued") return refused(m, 409, "lease_expired", "the attempt lapsed and the run was requeued");
  if (!HELD.includes(m.state) && !awaitingPush(m)) return refused(m, 409, "invalid_transition", `the run is ${m.state}`);
  return null;
}

const ended = (m: ModelRun, state: string): ModelRun => ({ ...m, state, leaseAt: null, launchDeadlineAt: null });

/**
 * Every answer Docket may give to `call` on a run in state `m`, when the call is served at some
 * moment in [t0, t1] (milliseconds, the run's clock). `ageMs` of an alarm is applied first.
 */
export function predict(m0: ModelRun, call: Call, t0: number, t1: number, t: Timing): Outcome[] {
  const m = call.kind === "alarm" ? moved(m0, call.ageMs) : m0;
  switch (call.kind) {
    case "claim": {
      if (m.state !== "queued") return [{ status: 204, code: null, next: m, effect: "none", why: `a ${m.state} run is not claimable` }];
      if (m.publication === "pushed") return [{ status: 204, code: null, next: m, effect: "none", why: "a pushed publication is Docket's to finish, no runner's" }];
      const granted: Outcome = {
        status: 200,
        code: null,
        next: { ...m, state: "claimed", attempt: m.attempt + 1, holder: call.machine, sandbox: null, launchedAt: null, lastReportAt: null, launchDeadlineAt: t0 + t.launchDeadlineMs, leaseAt: t0 + t.leaseTtlMs },
        effect: "change",
        setsLease: true,
        why: "a queued run past its backoff goes to the first claim",
      };
      // A publication continuation without its push is a push-only job: publishing at once, no launch.
      if (m.publication === "intent") granted.next = { ...granted.next, state: "publishing", launchDeadlineAt: null };
      const none: Outcome = { status: 204, code: null, next: m, effect: "none", why: "the run is backing off" };
      if (m.notBefore <= t0) return [granted];
      if (m.notBefore > t1) return [none];
      return [granted, none];
    }
    case "launched": {
      const bad = attemptRefusal(m, call.attempt, call.machine);
      if (bad) return [bad];
      if (m.state === "claimed") {
        return [{ status: 200, code: null, next: { ...m, state: "implementing", sandbox: call.sandbox, launchedAt: t0, launchedMax: m.attempt, launchDeadlineAt: null, leaseAt: t0 + t.leaseTtlMs }, effect: "change", setsLease: true, launches: true, why: "launched" }];
      }
      if (m.sandbox === call.sandbox) return [{ status: 200, code: null, next: m, effect: "none", why: "a replayed launched call" }];
      if (m.sandbox === null) return [{ status: 200, code: null, next: { ...m, sandbox: call.sandbox }, effect: "change", why: "a late launched call records the sandbox" }];
      return [refused(m, 409, "invalid_transition", "launched twice with another sandbox")];
    }
    case "lease": {
      const bad = attemptRefusal(m, call.attempt, call.machine);
      if (bad) return [bad];
      return [{ status: 200, code: null, next: { ...m, leaseAt: t0 + t.leaseTtlMs }, effect: "lease", setsLease: true, why: "lease refreshed" }];
    }
    case "launch_failed": {
      const bad = attemptRefusal(m, call.attempt, call.machine);
      if (bad) return [bad];
      if (m.state !== "claimed") return [refused(m, 409, "invalid_transition", "a launched attempt cannot fail to launch")];
      const r = reaped(m, t, t0);
      const { backoffFor, ...next } = r;
      return [{ status: 200, code: null, next, effect: "change", backoffFor, why: "launch failed" }];
    }
    case "stopped": {
      const bad = attemptRefusal(m, call.attempt, call.machine);
      if (bad) return [bad];
      if (m.state === "publishing" && !m.stop) return [{ status: 200, code: null, next: pausedAt(m), effect: "change", why: "the push was not made: paused at the publication's boundary" }];
      return [{ status: 200, code: null, next: ended(m, m.stop ? "cancelled" : "failed"), effect: "change", why: "the sandbox stopped" }];
    }
    case "report": {
      if (call.tokenAttempt === null) return [refused(m, 401, "unauthorized", "a token this run never issued")];
      const last = m.lastReportSeq;
      if (call.seq !== undefined && last && last.attempt === call.tokenAttempt && call.tokenAttempt === m.attempt) {
        // A report sent again after a lost answer: the same success, nothing changes (docs/protocol.md, "Daemon reports").
        if (call.seq === last.seq) return [{ status: 200, code: null, next: m, effect: "none", why: "the same report again" }];
        if (call.seq < last.seq) return [refused(m, 409, "stale_report", "an older report than the last accepted one")];
      }
      const bad = attemptRefusal(m, call.tokenAttempt, null);
      if (bad) return [bad];
      const final = call.report === "completed" || call.report === "failed" || call.report === "blocked";
      if (final && m.state === "publishing") return [refused(m, 409, "invalid_transition", "the attempt's outcome was accepted and is being published")];
      let next: ModelRun = { ...m, lastReportAt: t0 };
      if (call.seq !== undefined) next = { ...next, lastReportSeq: { attempt: call.tokenAttempt, seq: call.seq } };
      const launches = m.state === "claimed";
      if (launches) next = { ...next, state: "implementing", launchedAt: t0, launchDeadlineAt: null, launchedMax: m.attempt };
      if (call.phase !== null) next = { ...next, phase: call.phase };
      // A result while pausing pauses the run without a checkpoint: its resume is a recovery problem.
      if (call.report === "completed" && m.state === "pausing" && !m.stop) next = pausedAt(next);
      else if (call.report === "completed" && m.ticket && !m.stop) next = { ...next, state: "publishing", publication: "intent" };
      else if (call.report === "completed") next = ended(next, m.stop ? "cancelled" : "completed");
      if (call.report === "failed") next = ended(next, m.stop ? "cancelled" : "failed");
      if (call.report === "blocked") next = m.stop ? ended(next, "cancelled") : { ...ended(next, "blocked"), blockedAttempt: m.attempt };
      return [{ status: 200, code: null, next, effect: "change", launches, why: `a ${call.report} report` }];
    }
    case "cancel": {
      if (m.state === "cancelled") return [{ status: 200, code: null, next: m, effect: "none", why: "cancelled already" }];
      if (isTerminal(m.state)) return [refused(m, 410, "task_gone", `the run is ${m.state}`)];
      if (m.state === "queued" || m.state === "blocked" || m.state === "paused") return [{ status: 200, code: null, next: { ...ended(m, "cancelled"), stop: true }, effect: "change", why: "cancelled at once" }];
      if (m.state === "publishing") return [refused(m, 409, "invalid_transition", "a publishing run is cancelled once paused or ended")];
      if (m.stop) return [{ status: 202, code: null, next: m, effect: "none", why: "the stop request stands" }];
      return [{ status: 202, code: null, next: { ...m, stop: true }, effect: "change", why: "stop request recorded" }];
    }
    case "alarm": {
      const at = reapAt(m, t);
      const stays: Outcome = { status: 200, code: null, next: m, effect: "none", why: "no deadline passed" };
      if (at === null || at > t1) return [stays];
      // A publication's steps follow one another in one alarm: back to publishing, then the PR step.
      if (m.publication === "pushed") return [{ status: 200, code: null, next: publicationSteps(m, t, t1).at(-1) ?? m, effect: "change", why: "the PR step" }];
      const { backoffFor, ...next } = reaped(m, t, t0);
      const reap: Outcome = { status: 200, code: null, next, effect: "change", backoffFor, why: "the reaper acted" };
      return at <= t0 ? [reap] : [reap, stays];
    }
    case "dispatch_again":
      return call.samePayload
        ? [{ status: 200, code: null, next: m, effect: "none", why: "the same key and payload replays" }]
        : [refused(m, 409, "idempotency_conflict", "the same key with another payload")];
    case "redeliver":
      return [{ status: 202, code: null, next: m, effect: "none", why: "events published again" }];
    case "authorize":
      return [predictAuthorize(m, t0)];
    case "push_credential":
    case "pushed":
      // The code host's branch and its outage are set up with each push: they last whatever the answer.
      return [predictPublish(call.kind === "pushed" ? { ...m, hostMoved: call.moved, hostFailures: call.hostDown ? 1 : 0 } : m, call, t0, t)];
    default:
      return predictPause(m, call, t0);
  }
}

/** A paused run holds no machine, sandbox or lease. */
const pausedAt = (m: ModelRun): ModelRun => ({ ...m, state: "paused", holder: null, sandbox: null, leaseAt: null, launchDeadlineAt: null });

/** Whether the stored checkpoint covers the last attempt that launched (a run never launched, or whose last launch ended blocked, has nothing to restore). */
const checkpointCovers = (m: ModelRun) =>
  (m.launchedMax ?? 0) === 0 || (m.checkpointAttempt ?? 0) >= (m.launchedMax ?? 0) || m.blockedAttempt === m.launchedMax;

/** Stop at checkpoint, Resume paused run, the checkpoint and an unusable checkpoint (docs/protocol.md, "Pause and resume"). */
export function predictPause(m: ModelRun, call: PauseCall, t0: number): Outcome[] {
  switch (call.kind) {
    case "pause": {
      if (m.state === "queued") return [{ status: 200, code: null, next: { ...m, state: "paused", hold: true }, effect: "change", why: "a queued run pauses at once" }];
      if (m.state === "implementing") return [{ status: 200, code: null, next: { ...m, state: "pausing", hold: true }, effect: "change", why: "pause requested" }];
      if (m.state === "publishing") return [{ status: 200, code: null, next: { ...pausedAt(m), hold: true }, effect: "change", why: "paused at the publication's boundary" }];
      if ((m.state === "pausing" || m.state === "paused") && !m.hold) return [{ status: 200, code: null, next: { ...m, hold: true }, effect: "change", why: "the hold is added" }];
      if (m.state === "pausing" || m.state === "paused") return [{ status: 200, code: null, next: m, effect: "none", why: "paused and held already" }];
      return [refused(m, 409, "invalid_transition", `a ${m.state} run cannot be paused`)];
    }
    case "resume": {
      if (m.state !== "paused") return [refused(m, 409, "invalid_transition", `a ${m.state} run is not paused`)];
      // A publication continuation has no coding turn to restore: its resume pushes or looks the PR up again.
      if (!m.publication && !checkpointCovers(m)) return [refused(m, 409, "checkpoint_missing", "the run executed and no checkpoint covers it")];
      return [{ status: 200, code: null, next: { ...m, state: "queued", hold: false, holder: null, sandbox: null, leaseAt: null, launchDeadlineAt: null, notBefore: t0 }, effect: "change", why: "the continuation is queued" }];
    }
    case "checkpoint": {
      if (call.tokenAttempt === null || call.tokenAttempt !== call.attempt) return [refused(m, 401, "unauthorized", "not this attempt's token")];
      if (m.checkpointAttempt === call.attempt && m.attempt === call.attempt && (m.state === "paused" || m.state === "cancelled")) {
        return [{ status: 200, code: null, next: m, effect: "none", why: "the stored checkpoint sent again: a retry after a lost answer" }];
      }
      const bad = attemptRefusal(m, call.attempt, null);
      if (bad) return [bad];
      if (m.state !== "pausing") return [refused(m, 409, "invalid_transition", `a ${m.state} run takes no checkpoint`)];
      const paused = { ...pausedAt(m), checkpointAttempt: call.attempt };
      return [{ status: 200, code: null, next: m.stop ? ended(paused, "cancelled") : paused, effect: "change", why: "the checkpoint is stored" }];
    }
    case "checkpoint_unusable": {
      const bad = attemptRefusal(m, call.attempt, call.machine);
      if (bad) return [bad];
      if (m.state !== "claimed") return [refused(m, 409, "invalid_transition", "the attempt was launched")];
      const paused = { ...pausedAt(m), hold: true };
      return [{ status: 200, code: null, next: m.stop ? ended(paused, "cancelled") : paused, effect: "change", why: "the checkpoint did not verify" }];
    }
  }
}

/**
 * Only a blocked run is authorized again: back to the queue, claimable at once, by any machine;
 * one an operator stopped before it blocked keeps the hold and waits paused for Resume paused run.
 */
function predictAuthorize(m: ModelRun, t0: number): Outcome {
  if (m.state !== "blocked") return refused(m, 409, "invalid_transition", `a ${m.state} run is not blocked`);
  const next: ModelRun = { ...m, state: "queued", holder: null, sandbox: null, leaseAt: null, launchDeadlineAt: null, notBefore: t0 };
  if (m.hold) return { status: 200, code: null, next: { ...next, state: "paused" }, effect: "change", why: "a human authorized the blocked run; the operator's hold keeps it paused" };
  return { status: 200, code: null, next, effect: "change", why: "a human authorized the blocked run" };
}

/**
 * The same answers, plus the reaper acting in the background right after, where the answer left
 * a deadline that is due by `horizon` (the alarm is armed at the earliest deadline, at once if past).
 */
export function withBackground(outcomes: Outcome[], t: Timing, t0: number, horizon: number): Outcome[] {
  const all = [...outcomes];
  for (const o of outcomes) {
    const at = reapAt(o.next, t);
    if (at === null || at > horizon) continue;
    if (o.next.publication === "pushed") {
      // The alarm's publication steps, any number of them done by the time the run is read.
      for (const next of publicationSteps(o.next, t, t0)) all.push({ ...o, next, answer: o.next, effect: "change", background: true, why: `${o.why}, then the alarm's PR step` });
      continue;
    }
    const { backoffFor, ...next } = reaped(o.next, t, t0);
    all.push({ ...o, next, answer: o.next, effect: "change", backoffFor, background: true, why: `${o.why}, then the reaper` });
  }
  return all;
}

/** The runs a pushed publication goes through on its own by `at`: back to publishing (when queued), then the PR steps due. */
function publicationSteps(m: ModelRun, t: Timing, at: number): ModelRun[] {
  const steps: ModelRun[] = [];
  for (let run = m; run.publication === "pushed" && (run.state === "queued" || (run.state === "publishing" && (run.prRetryAt ?? 0) <= at)); ) {
    run = reaped(run, t, at);
    steps.push(run);
  }
  return steps;
}

/**
 * One PR step against the code host: a failed read is a try recorded, retried after
 * PUBLICATION_RETRY_MS, and the last of PUBLICATION_TRIES_MAX fails the run; otherwise the branch
 * must still be at the pushed head (else publish_failed), and the PR completes the run.
 */
function prStep(m: ModelRun, t: Timing, now: number): ModelRun {
  if ((m.hostFailures ?? 0) > 0) {
    const tries = (m.prTries ?? 0) + 1;
    const next = { ...m, hostFailures: (m.hostFailures ?? 0) - 1, prTries: tries, prRetryAt: now + (t.publicationRetryMs ?? 30_000) };
    return tries >= (t.publicationTriesMax ?? 5) ? ended(next, "failed") : next;
  }
  return ended(m, m.hostMoved ? "failed" : "completed");
}

/** The push credential and the push (docs/protocol.md, "Publication"): only the attempt's machine, only while the push is awaited. */
function predictPublish(m: ModelRun, call: PublishCall, t0: number, t: Timing): Outcome {
  // The recorded push reported again answers the same, whatever the run became since.
  if (call.kind === "pushed" && m.publication === "pushed" && call.branch === "own" && call.attempt === m.attempt) return { status: 200, code: null, next: m, effect: "none", why: "the recorded push again" };
  const bad = attemptRefusal(m, call.attempt, call.machine);
  if (bad) return bad;
  if (!awaitingPush(m)) return refused(m, 409, "invalid_transition", `a ${m.state} run is not awaiting a push`);
  if (call.kind === "push_credential") return { status: 200, code: null, next: { ...m, leaseAt: t0 + t.leaseTtlMs }, effect: "lease", setsLease: true, why: "a push credential; the lease renewed" };
  if (call.branch === "other") return refused(m, 400, "invalid_request", "not the publication's branch");
  return { status: 200, code: null, next: { ...m, publication: "pushed", leaseAt: null }, effect: "change", why: "the push recorded" };
}

export function describeRun(m: ModelRun): string {
  return `${m.state} attempt=${m.attempt} holder=${m.holder} sandbox=${m.sandbox} stop=${m.stop}`;
}
