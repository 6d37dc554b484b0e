// TicketObject: one per issue of one autopilot project (idFromName(ticketObjectName(project, key)),
// e.g. `apj_…:github:owner/repo#12`, src/autopilot/provider.ts): two organizations watching one
// repository never share a ticket, its generation or its history. It serializes everything that
// can admit a run for that ticket: webhooks, reconciliation, an operator's request
// (../shared/DESIGN.md, "Each ticket is a Durable Object too"; ../shared/spec/run-lifecycle.md,
// "Admission"). It keeps the readiness generation (the id of the
// ready transition that opened it), the webhook delivery ids it has seen, the id of its one
// unfinished run, and a bounded history of admissions, refusals and lapses with their reasons.
// The Worker gathers the tracker's facts and applies the pure rules; this object decides.

import { DurableObject } from "cloudflare:workers";
import { loadConfig, type Config } from "../src/config";
import type { Env } from "../src/env";
import { isRefusal } from "../src/errors";
import { log } from "../src/lib/log";
import { newId } from "../src/lib/crypto";
import { runStub } from "../src/lib/stubs";
import { dispatchRun, type DispatchInput } from "../src/run/dispatch";
import { isTerminal } from "../src/run/states";
import type { EligibilityResult, ReadinessResult } from "../src/autopilot/deps";
import type { IssueFacts, ReadyTransition } from "../src/autopilot/provider";
import { migrate } from "./sql-migrations";
import { legacyTicketRow, withPendingRunId } from "./ticket-carry-over";
import { TICKET_OBJECT_MIGRATIONS } from "./ticket-schema";

/** Which ticket a caller means: its object's name, and the key it was kept under before (ticket-carry-over.ts). */
export interface TicketAddress {
  projectId: string;
  /** `github:owner/repo#12`, the repository spelt as the project spells it. */
  ticketKey: string;
}

/** Which of the four doors an observation came through; all obey the same policy. */
export type AdmissionDoor = "webhook" | "reconcile" | "startup" | "operator";

/** What one door learned about the ticket, with the rules already applied by the Worker. */
export interface Observation {
  project: { id: string; orgId: string; queueCapacity: number };
  ticketKey: string;
  number: number;
  door: AdmissionDoor;
  /** X-GitHub-Delivery of a webhook; null for reconciliation and operators. */
  deliveryId: string | null;
  facts: IssueFacts | null;
  eligibility: EligibilityResult;
  /**
   * The latest addition of the ready label the tracker records: its id is the readiness generation.
   * Without a record, the webhook delivery the trusted-actor assumption accepted (src/autopilot/admission.ts).
   */
  transition: ReadyTransition | null;
  /** The human-readiness verdict on that transition, or on a labeled webhook's sender alone; else null. */
  readiness: ReadinessResult | null;
  /** The run to create when this observation admits one. */
  dispatch: DispatchInput;
}

export type TicketStatus = "idle" | "admitting" | "admitted" | "refused" | "capacity_wait" | "lapsed" | "done";

export type ObservationOutcome =
  | "duplicate_delivery"
  | "admitted"
  | "already_admitted"
  | "unchanged"
  | "refused"
  | "capacity_wait"
  | "lapsed"
  | "authorized";

export interface ObservationAnswer {
  outcome: ObservationOutcome;
  runId: string | null;
  reasons: string[];
}

export interface TicketHistoryEntry {
  at_ms: number;
  kind: "admitted" | "refused" | "capacity_wait" | "lapsed" | "run_ended" | "authorized";
  /** `withdraw_retry`: the ticket's alarm finished a lapse whose withdrawal had failed. */
  door: AdmissionDoor | "withdraw_retry" | "run_end";
  generation: string | null;
  run_id: string | null;
  reasons: string[];
  basis: string | null;
  actor: string | null;
}

export interface TicketState {
  ticket_key: string;
  project_id: string;
  status: TicketStatus;
  reasons: string[];
  generation: string | null;
  admitted_generation: string | null;
  run_id: string | null;
  updated_at_ms: number;
  /** A recorded lapse whose run is not withdrawn yet (a claim of that run is refused and cancels it). */
  withdrawal: { run_id: string; reason: string; attempts: number } | null;
  history: TicketHistoryEntry[];
}

export type TicketRow = {
  ticket_key: string;
  project_id: string;
  org_id: string;
  number: number;
  status: TicketStatus;
  reasons: string;
  generation: string | null;
  admitted_generation: string | null;
  /** An admission begun (its run may exist) and not yet recorded: the next observation finishes it. */
  pending_generation: string | null;
  /** The ticket's run; while an admission is pending, the id its run is (or will be) created under. */
  run_id: string | null;
  updated_at_ms: number;
  /** A lapse recorded and its run not yet withdrawn: the ticket no longer backs this run. */
  withdraw_run_id: string | null;
  withdraw_reason: string | null;
  withdraw_attempts: number;
};

/** The ticket's answer to a claim of one of its runs (RunObject.claimCounted). */
export type BackingAnswer = { backs: true } | { backs: false; reason: string } | { backs: "unknown"; reason: string };

/** What a withdrawal of the ticket's queued run came to. */
type WithdrawOutcome = "withdrawn" | "handed_out" | "failed";

/** A project's admitted runs still waiting for a runner, and admissions under way: what queueCapacity bounds. */
const WAITING = `SELECT COUNT(*) FROM autopilot_tickets t LEFT JOIN runs r ON r.id = t.run_id
  WHERE t.project_id = ?1 AND t.ticket_key <> ?2 AND (t.status = 'admitting' OR r.state = 'queued')`;
const WAITING_RUNS_SQL = `SELECT (${WAITING}) AS n`;

/**
 * Takes one of the project's queue places for this ticket, in one D1 statement (D1 runs one at a
 * time), so two tickets admitted at once cannot both take the last place. The place is the ticket's
 * index row marked `admitting` until its run is recorded.
 */
const RESERVE_SQL = `INSERT INTO autopilot_tickets (project_id, ticket_key, org_id, number, status, reasons, generation, run_id, updated_at_ms)
  SELECT ?1, ?2, ?3, ?4, 'admitting', '[]', ?5, NULL, ?6 WHERE (${WAITING}) < ?7
  ON CONFLICT (project_id, ticket_key) DO UPDATE SET status = 'admitting', reasons = '[]', generation = excluded.generation,
    run_id = NULL, updated_at_ms = excluded.updated_at_ms`;

/** The ticket's row in the project's index (D1), which GET …/tickets and reconciliation read. */
const INDEX_SQL = `INSERT INTO autopilot_tickets (project_id, ticket_key, org_id, number, status, reasons, generation, run_id, updated_at_ms)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
  ON CONFLICT (project_id, ticket_key) DO UPDATE SET status = excluded.status, reasons = excluded.reasons,
    generation = excluded.generation, run_id = excluded.run_id, updated_at_ms = excluded.updated_at_ms
  WHERE excluded.updated_at_ms >= autopilot_tickets.updated_at_ms`;

const NO_WITHDRAWAL = { withdraw_run_id: null, withdraw_reason: null, withdraw_attempts: 0 } as const;

export class TicketObject extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  private readonly config: Config;
  private tail: Promise<unknown> = Promise.resolve();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.config = loadConfig(env);
    migrate(ctx.storage, TICKET_OBJECT_MIGRATIONS);
  }

  /**
   * One observation of the ticket, from any door. Serialized: a webhook racing a reconciliation
   * runs one after the other here, so the second sees the first's run and admits nothing.
   */
  async observe(obs: Observation): Promise<ObservationAnswer> {
    return this.serialized(async () => {
      await this.carryOver({ projectId: obs.project.id, ticketKey: obs.ticketKey });
      return this.decide(obs);
    });
  }

  /**
   * Asked by a run object right before a claim hands out `runId`
   * (../shared/spec/run-lifecycle.md, "Queue and dispatch": current tracker eligibility). It reads
   * only what the ticket recorded (never the tracker), after any observation under way: the run is
   * backed while it is the ticket's run and no lapse of it is recorded.
   */
  async backs(runId: string, at: TicketAddress): Promise<BackingAnswer> {
    return this.serialized(async () => {
      await this.carryOver(at);
      return this.backing(runId);
    });
  }

  /**
   * The outbox tells the ticket its run ended (src/autopilot/ticket-run-end.ts), so the ticket reads
   * `done` at once rather than at its next observation. Idempotent: only the ticket's own unfinished
   * run is recorded, once; the run object is read, never trusted from the event. A pending
   * admission is left to the next observation, which records its run first.
   */
  async runEnded(runId: string): Promise<boolean> {
    return this.serialized(async () => {
      const row = this.load();
      if (!row || row.run_id !== runId || row.pending_generation !== null) return false;
      return (await this.unfinishedRun(row, "run_end", Date.now())) === null;
    });
  }

  /** Retries the withdrawal of a lapsed ticket's run that failed (bounded by AUTOPILOT_WITHDRAW_ATTEMPTS_MAX). */
  async alarm(): Promise<void> {
    await this.serialized(async () => {
      const row = this.load();
      if (row?.withdraw_run_id) await this.withdrawLapsed(row, "withdraw_retry", Date.now());
    });
  }

  /** The ticket as GET …/tickets shows it, with its history (newest first). */
  async read(at: TicketAddress): Promise<TicketState | null> {
    await this.serialized(() => this.carryOver(at));
    const row = this.load();
    if (!row) return null;
    const history = this.sql
      .exec<{ entry: string }>("SELECT entry FROM history ORDER BY seq DESC")
      .toArray()
      .map((r) => JSON.parse(r.entry) as TicketHistoryEntry);
    return {
      ticket_key: row.ticket_key,
      project_id: row.project_id,
      status: row.status,
      reasons: JSON.parse(row.reasons) as string[],
      generation: row.generation,
      admitted_generation: row.admitted_generation,
      run_id: row.run_id,
      updated_at_ms: row.updated_at_ms,
      withdrawal: row.withdraw_run_id ? { run_id: row.withdraw_run_id, reason: row.withdraw_reason ?? "", attempts: row.withdraw_attempts } : null,
      history,
    };
  }

  private backing(runId: string): BackingAnswer {
    const row = this.load();
    if (!row) return { backs: false, reason: "no ticket records this run" };
    if (row.withdraw_run_id === runId) return { backs: false, reason: row.withdraw_reason ?? "eligibility lapsed" };
    // An admission interrupted before it recorded its run: the next observation settles it.
    if (row.run_id === runId && row.pending_generation !== null) return { backs: "unknown", reason: "the ticket's admission of its run is unfinished" };
    if (row.run_id === runId) return { backs: true };
    const reasons = JSON.parse(row.reasons) as string[];
    if (row.status === "lapsed" && reasons.length > 0) return { backs: false, reason: `eligibility lapsed: ${reasons.join("; ")}` };
    return { backs: false, reason: `the ticket ${row.ticket_key} no longer backs this run (its run: ${row.run_id ?? "none"}, status ${row.status})` };
  }

  // ---- the decision ----------------------------------------------------------------------------

  private async decide(obs: Observation): Promise<ObservationAnswer> {
    const now = Date.now();
    if (obs.deliveryId !== null && this.seen(obs.deliveryId, now)) {
      return { outcome: "duplicate_delivery", runId: this.load()?.run_id ?? null, reasons: [] };
    }
    const stored = this.load();
    // An issue never made ready (a comment on any issue of the repository) leaves no ticket behind;
    // a ready label's webhook without a recorded transition is judged (readiness), and its refusal kept.
    if (!stored && !obs.transition && !obs.readiness) return { outcome: "unchanged", runId: null, reasons: [] };
    // The object's name holds the project (ticketObjectName): another project's row cannot be here.
    if (stored && stored.project_id !== obs.project.id) throw new Error(`the ticket ${stored.ticket_key} of ${stored.project_id} was asked about ${obs.project.id}`);
    let row = stored ?? this.fresh(obs, now);
    if (row.pending_generation !== null) row = await this.finishAdmission(obs, row, now);
    const generation = obs.transition?.eventId ?? row.generation;
    const unfinished = row.run_id ? await this.unfinishedRun(row, obs.door, now) : null;
    if (unfinished) {
      const authorized = obs.eligibility.eligible ? await this.authorizeBlocked(obs, row, unfinished, now) : null;
      if (authorized) return authorized;
      // Eligible again before the withdrawal happened: the ticket backs its run again.
      if (obs.eligibility.eligible) return this.settle(obs, { ...row, ...NO_WITHDRAWAL }, now, { outcome: "already_admitted", runId: unfinished, reasons: [] });
      return this.lapse(obs, row, unfinished, obs.eligibility.reasons, now);
    }
    // A ticket whose run ended stays done until the issue is made ready again (a new ready transition):
    // a comment or an edit after the run moved the issue to review is not a refusal.
    if (row.status === "done" && (!obs.transition || obs.transition.eventId === row.admitted_generation)) {
      return this.settle(obs, { ...row, generation }, now, { outcome: "unchanged", runId: null, reasons: [] });
    }
    if (!obs.eligibility.eligible) return this.refuse(obs, row, now, "refused", obs.eligibility.reasons, generation);
    if (!obs.transition) {
      const reason = obs.readiness && !obs.readiness.ok ? obs.readiness.reason : "the tracker records no addition of the ready label to this issue";
      return this.refuse(obs, row, now, "refused", [reason], generation);
    }
    // The ready transition that already has its run: an edit or a comment changes nothing. One
    // whose run was withdrawn when its eligibility lapsed says so, and how to get a new run.
    if (obs.transition.eventId === row.admitted_generation) {
      if (row.status !== "lapsed") return this.settle(obs, { ...row, generation }, now, { outcome: "unchanged", runId: null, reasons: [] });
      const reason = `eligible again, but this ready label's run was withdrawn when its eligibility lapsed; a person makes the issue ready again (removes and adds its ready label) for a new run`;
      const told: TicketRow = { ...row, generation, reasons: JSON.stringify([reason]), updated_at_ms: now };
      this.write(obs, told, now, null);
      await this.project(told);
      return { outcome: "unchanged", runId: null, reasons: [reason] };
    }
    const readiness = obs.readiness;
    if (!readiness || !readiness.ok) {
      return this.refuse(obs, row, now, "refused", [readiness ? readiness.reason : "no human readiness evidence"], generation);
    }
    // A disabled or draining project scheduler admits nothing new; reconciliation reconsiders the issue.
    const closed = await this.schedulerRefusal(obs);
    if (closed) return this.refuse(obs, row, now, "refused", [closed], generation);
    if (!(await this.reservePlace(obs, row, obs.transition.eventId, now))) {
      const waiting = await this.waitingRuns(obs, row);
      const reason = `the project's queue is full: ${waiting} admitted runs wait for a runner (queue capacity ${obs.project.queueCapacity}); reconciliation reconsiders this issue`;
      return this.refuse(obs, row, now, "capacity_wait", [reason], generation);
    }
    return this.admit(obs, row, obs.transition.eventId, readiness, now);
  }

  /** "scheduler disabled" or "draining" while the project's scheduler stops admission (docs/protocol.md, "Autopilot scheduler"). */
  private async schedulerRefusal(obs: Observation): Promise<string | null> {
    return this.env.SCHEDULER.get(this.env.SCHEDULER.idFromName(obs.project.orgId)).admissionRefusal(obs.project.id);
  }

  /**
   * Records the pending generation with the id its run will have, then creates the run under that id
   * through dispatch (the code POST /v1/runs uses), then records the ticket's claim on it. A crash
   * anywhere in between is finished by the next observation with the same id, however much later:
   * the run is found by its id, never by an idempotency key that is taken over after
   * IDEMPOTENCY_KEY_TTL_MS (../shared/spec/run-lifecycle.md, "Admission": at most one unfinished run).
   */
  private async admit(obs: Observation, row: TicketRow, generation: string, readiness: Extract<ReadinessResult, { ok: true }>, now: number): Promise<ObservationAnswer> {
    if (row.run_id !== null) throw new Error(`the ticket ${row.ticket_key} admits while it names the run ${row.run_id}`);
    const pending: TicketRow = { ...row, pending_generation: generation, run_id: newId("run") };
    this.ctx.storage.transactionSync(() => this.store(pending));
    const runId = await this.createRun(obs, pending);
    const next: TicketRow = { ...pending, status: "admitted", reasons: "[]", generation, admitted_generation: generation, pending_generation: null, updated_at_ms: now };
    this.write(obs, next, now, { kind: "admitted", run_id: runId, reasons: [], basis: readiness.basis, actor: readiness.actor });
    await this.project(next);
    log("autopilot.admitted", { ticket: obs.ticketKey, project: obs.project.id, run_id: runId, generation, door: obs.door, basis: readiness.basis, actor: readiness.actor, reason: "a human ready transition and an eligible issue" });
    return { outcome: "admitted", runId, reasons: [] };
  }

  /** The pending admission's run, created under the id the ticket recorded, or found again (RunObject.create keeps a run that exists). */
  private async createRun(obs: Observation, row: TicketRow): Promise<string> {
    const runId = row.run_id;
    if (runId === null) throw new Error(`the ticket ${row.ticket_key} has a pending admission without its run id`);
    await dispatchRun(this.env, row.org_id, obs.dispatch, null, { runId, ticketKey: row.ticket_key, projectId: row.project_id });
    return runId;
  }

  /**
   * An admission that crashed between recording its run's id and recording the run: the run under
   * that id is found (or created, when the crash came first), and the ticket records its claim on
   * it. The observation then goes on as usual, so a run whose issue has lapsed meanwhile is withdrawn.
   */
  private async finishAdmission(obs: Observation, row: TicketRow, now: number): Promise<TicketRow> {
    const generation = row.pending_generation!;
    const runId = await this.createRun(obs, row);
    const next: TicketRow = { ...row, status: "admitted", reasons: "[]", admitted_generation: generation, pending_generation: null, updated_at_ms: now };
    const reasons = ["an admission interrupted before the ticket recorded it, finished"];
    this.ctx.storage.transactionSync(() => {
      this.store(next);
      this.remember({ at_ms: now, kind: "admitted", door: obs.door, generation, run_id: runId, reasons, basis: null, actor: null });
    });
    await this.project(next);
    log("autopilot.admitted", { ticket: obs.ticketKey, project: row.project_id, run_id: runId, generation, door: obs.door, reason: reasons[0] });
    return next;
  }

  /**
   * Only a new human readiness generation continues a blocked run (../shared/spec/run-lifecycle.md,
   * "Blocker and failure"): a ready transition a person made after the blocker, never the one that
   * admitted the run. The run goes back to the queue (the same run, its attempt history kept) and
   * the generation is recorded as consumed. A reply comment, a label snapshot or a bot's label
   * brings no such transition and changes nothing. Null: nothing to authorize.
   */
  private async authorizeBlocked(obs: Observation, row: TicketRow, runId: string, now: number): Promise<ObservationAnswer | null> {
    const transition = obs.transition;
    const readiness = obs.readiness;
    if (!transition || transition.eventId === row.admitted_generation || !readiness?.ok) return null;
    const run = await runStub(this.env, runId).read(row.org_id);
    if (isRefusal(run) || run.state !== "blocked" || !run.blocker) return null;
    // GitHub records whole seconds: a transition in the blocker's second counts as after it.
    if (transition.atMs < Math.floor(run.blocker.at_ms / 1_000) * 1_000) return null;
    const answer = await runStub(this.env, runId).control(row.org_id, { type: "authorize" });
    if (isRefusal(answer)) return null;
    const generation = transition.eventId;
    const next: TicketRow = { ...row, ...NO_WITHDRAWAL, status: "admitted", reasons: "[]", generation, admitted_generation: generation, updated_at_ms: now };
    const reasons = [`a human readiness change after the blocker (${run.blocker.summary}) requeued the run`];
    this.write(obs, next, now, { kind: "authorized", run_id: runId, reasons, basis: readiness.basis, actor: readiness.actor });
    await this.project(next);
    log("autopilot.authorized", { ticket: obs.ticketKey, project: obs.project.id, run_id: runId, generation, door: obs.door, actor: readiness.actor, reason: reasons[0] });
    return { outcome: "authorized", runId, reasons: [] };
  }

  /**
   * The ticket no longer backs its queued run: the lapse is recorded first (from then on a claim of
   * the run is refused and the run cancelled, RunObject.claimCounted), then the run is withdrawn.
   * A failed withdrawal is retried from the alarm; a crash in between is caught by the claim.
   */
  private async lapse(obs: Observation, row: TicketRow, runId: string, reasons: string[], now: number): Promise<ObservationAnswer> {
    const reason = `eligibility lapsed: ${reasons.join("; ")}`;
    const pending: TicketRow = { ...row, reasons: JSON.stringify(reasons), withdraw_run_id: runId, withdraw_reason: reason, withdraw_attempts: 0 };
    this.write(obs, pending, now, null);
    // Armed before the withdrawal: a crash right after the record still has it retried.
    await this.ctx.storage.setAlarm(now + this.config.autopilotWithdrawRetryMs);
    const outcome = await this.withdrawLapsed(pending, obs.door, now);
    if (outcome === "handed_out") return { outcome: "already_admitted", runId, reasons };
    return { outcome: "lapsed", runId, reasons };
  }

  /**
   * Withdraws the run of a recorded lapse. Withdrawn (or already ended, e.g. cancelled by a claim's
   * check): the lapse is complete. Already handed out: the run goes on and the ticket keeps its
   * claim. Failed: retried from the alarm after AUTOPILOT_WITHDRAW_RETRY_MS * 2^(n-1), a bounded number of times.
   */
  private async withdrawLapsed(row: TicketRow, door: TicketHistoryEntry["door"], now: number): Promise<WithdrawOutcome> {
    const runId = row.withdraw_run_id!;
    const reason = row.withdraw_reason ?? "eligibility lapsed";
    let answer: Awaited<ReturnType<ReturnType<typeof runStub>["withdraw"]>> | null = null;
    let failure: string | null = null;
    try {
      answer = await runStub(this.env, runId).withdraw(row.org_id, reason);
      if (isRefusal(answer)) failure = `${answer.error.code}: ${answer.error.message}`;
    } catch (err) {
      failure = String(err);
    }
    if (failure !== null || answer === null || isRefusal(answer)) {
      await this.withdrawFailed(row, failure ?? "no answer", now);
      return "failed";
    }
    if (!answer.withdrawn && !isTerminal(answer.run.state)) {
      // Already handed out: the run goes on; the ticket keeps its claim and notes nothing more.
      this.ctx.storage.transactionSync(() => this.store({ ...row, ...NO_WITHDRAWAL }));
      return "handed_out";
    }
    const reasons = JSON.parse(row.reasons) as string[];
    const next: TicketRow = { ...row, ...NO_WITHDRAWAL, status: "lapsed", run_id: null, updated_at_ms: now };
    this.ctx.storage.transactionSync(() => {
      this.store(next);
      this.remember({ at_ms: now, kind: "lapsed", door, generation: row.generation, run_id: runId, reasons, basis: null, actor: null });
    });
    await this.project(next);
    log("autopilot.lapsed", { ticket: row.ticket_key, project: row.project_id, run_id: runId, door, reason });
    return "withdrawn";
  }

  private async withdrawFailed(row: TicketRow, failure: string, now: number): Promise<void> {
    const attempts = row.withdraw_attempts + 1;
    this.ctx.storage.transactionSync(() => this.store({ ...row, withdraw_attempts: attempts }));
    const max = this.config.autopilotWithdrawAttemptsMax;
    if (attempts >= max) {
      // The claim's check still keeps the run from starting; the next observation tries again.
      log("autopilot.withdraw_abandoned", { ticket: row.ticket_key, run_id: row.withdraw_run_id, attempts, reason: failure });
      return;
    }
    const at = now + this.config.autopilotWithdrawRetryMs * 2 ** (attempts - 1);
    await this.ctx.storage.setAlarm(at);
    log("autopilot.withdraw_failed", { ticket: row.ticket_key, run_id: row.withdraw_run_id, attempts, retry_at_ms: at, reason: failure });
  }

  /** A refusal (or a capacity wait) is recorded when it differs from the ticket's standing one. */
  private async refuse(obs: Observation, row: TicketRow, now: number, status: "refused" | "capacity_wait", reasons: string[], generation: string | null): Promise<ObservationAnswer> {
    const outcome = status;
    const changed = row.status !== status || row.reasons !== JSON.stringify(reasons);
    if (!changed) {
      // The index row too: a queue place taken by an admission that did not finish is given back.
      await this.project({ ...row, generation });
      return this.settle(obs, { ...row, generation }, now, { outcome, runId: null, reasons });
    }
    const next: TicketRow = { ...row, status, reasons: JSON.stringify(reasons), generation, updated_at_ms: now };
    this.write(obs, next, now, { kind: status, run_id: null, reasons, basis: null, actor: null });
    await this.project(next);
    return { outcome, runId: null, reasons };
  }

  /** Nothing new to record but the delivery id (and a newer generation, if any). */
  private async settle(obs: Observation, row: TicketRow, now: number, answer: ObservationAnswer): Promise<ObservationAnswer> {
    this.write(obs, row, now, null);
    return answer;
  }

  // ---- the run it backs ------------------------------------------------------------------------

  /** The ticket's run id while that run has not ended; an ended run frees the ticket (recorded once). */
  private async unfinishedRun(row: TicketRow, door: TicketHistoryEntry["door"], now: number): Promise<string | null> {
    const runId = row.run_id!;
    const run = await runStub(this.env, runId).read(row.org_id);
    if (!isRefusal(run) && !isTerminal(run.state)) return runId;
    const reason = isRefusal(run) ? `the run is gone: ${run.error.message}` : `the run ended ${run.state}`;
    const next: TicketRow = { ...row, ...NO_WITHDRAWAL, status: "done", reasons: JSON.stringify([reason]), run_id: null, updated_at_ms: now };
    this.ctx.storage.transactionSync(() => {
      this.store(next);
      this.remember({ at_ms: now, kind: "run_ended", door, generation: row.admitted_generation, run_id: runId, reasons: [reason], basis: null, actor: null });
    });
    Object.assign(row, next);
    await this.project(next);
    return null;
  }

  private async reservePlace(obs: Observation, row: TicketRow, generation: string, now: number): Promise<boolean> {
    const result = await this.env.DB.prepare(RESERVE_SQL)
      .bind(obs.project.id, row.ticket_key, row.org_id, row.number, generation, now, obs.project.queueCapacity)
      .run();
    return result.meta.changes > 0;
  }

  private async waitingRuns(obs: Observation, row: TicketRow): Promise<number> {
    const waiting = await this.env.DB.prepare(WAITING_RUNS_SQL).bind(obs.project.id, row.ticket_key).first<{ n: number }>();
    return waiting?.n ?? 0;
  }

  // ---- tickets kept before they were per project -------------------------------------------------

  /**
   * What this object recorded for `projectId`, asked of an object named the old way (the bare key,
   * `github:Owner/Repo#12`, shared by every project watching the repository): see carryOver.
   */
  async legacyRow(projectId: string): Promise<TicketRow | null> {
    return this.serialized(async () => {
      const row = this.load();
      return row?.project_id === projectId ? row : null;
    });
  }

  /**
   * Tickets were once kept one per repository issue, whichever project watched it. The first time
   * this object is used it takes over the row the old object kept for its project (generations, the
   * unfinished or pending run, a withdrawal under way), so a run admitted before the change is still
   * the ticket's run: backed at its claim, never admitted twice. The old object, with its history
   * (which may mix two organizations' entries) and any other project's row, is left behind. Done
   * once (the `carried_over` row); the old object is asked only when the project's index lists it.
   */
  private async carryOver(at: TicketAddress): Promise<void> {
    if (this.load() || this.sql.exec("SELECT 1 FROM carried_over").toArray().length > 0) return;
    const old = await legacyTicketRow(this.env, at);
    const row = old ? await withPendingRunId(this.env, old) : null;
    this.ctx.storage.transactionSync(() => {
      if (row) this.store(row);
      this.sql.exec("INSERT INTO carried_over (id, at_ms, run_id) VALUES (1, ?, ?)", Date.now(), row?.run_id ?? null);
    });
    if (row) log("autopilot.ticket_carried_over", { ticket: row.ticket_key, project: row.project_id, run_id: row.run_id, reason: "kept per repository before tickets were per project" });
  }

  // ---- storage -----------------------------------------------------------------------------------

  private load(): TicketRow | null {
    return this.sql.exec<TicketRow>("SELECT * FROM ticket WHERE id = 1").toArray()[0] ?? null;
  }

  private fresh(obs: Observation, now: number): TicketRow {
    return {
      ticket_key: obs.ticketKey,
      project_id: obs.project.id,
      org_id: obs.project.orgId,
      number: obs.number,
      status: "idle",
      reasons: "[]",
      generation: null,
      admitted_generation: null,
      pending_generation: null,
      run_id: null,
      updated_at_ms: now,
      ...NO_WITHDRAWAL,
    };
  }

  private seen(deliveryId: string, now: number): boolean {
    const row = this.sql.exec<{ seen_at_ms: number }>("SELECT seen_at_ms FROM deliveries WHERE delivery_id = ?", deliveryId).toArray()[0];
    return row !== undefined && now - row.seen_at_ms < this.config.autopilotDeliveryTtlMs;
  }

  /** The ticket row, the delivery id and a history entry (when there is one), in one transaction. */
  private write(obs: Observation, row: TicketRow, now: number, entry: Omit<TicketHistoryEntry, "at_ms" | "door" | "generation"> | null): void {
    this.ctx.storage.transactionSync(() => {
      this.store(row);
      if (obs.deliveryId !== null) this.rememberDelivery(obs.deliveryId, now);
      if (entry) this.remember({ ...entry, at_ms: now, door: obs.door, generation: row.generation });
    });
  }

  private store(row: TicketRow): void {
    this.sql.exec(
      `INSERT INTO ticket (id, ticket_key, project_id, org_id, number, status, reasons, generation, admitted_generation, pending_generation, run_id, updated_at_ms,
         withdraw_run_id, withdraw_reason, withdraw_attempts)
       VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET project_id = excluded.project_id, org_id = excluded.org_id, status = excluded.status, reasons = excluded.reasons,
         generation = excluded.generation, admitted_generation = excluded.admitted_generation, pending_generation = excluded.pending_generation,
         run_id = excluded.run_id, updated_at_ms = excluded.updated_at_ms, withdraw_run_id = excluded.withdraw_run_id,
         withdraw_reason = excluded.withdraw_reason, withdraw_attempts = excluded.withdraw_attempts`,
      row.ticket_key,
      row.project_id,
      row.org_id,
      row.number,
      row.status,
      row.reasons,
      row.generation,
      row.admitted_generation,
      row.pending_generation,
      row.run_id,
      row.updated_at_ms,
      row.withdraw_run_id,
      row.withdraw_reason,
      row.withdraw_attempts,
    );
  }

  /** Delivery ids expire after AUTOPILOT_DELIVERY_TTL_MS and are capped at AUTOPILOT_DELIVERIES_MAX (oldest dropped). */
  private rememberDelivery(deliveryId: string, now: number): void {
    this.sql.exec("INSERT INTO deliveries (delivery_id, seen_at_ms) VALUES (?, ?) ON CONFLICT (delivery_id) DO UPDATE SET seen_at_ms = excluded.seen_at_ms", deliveryId, now);
    this.sql.exec("DELETE FROM deliveries WHERE seen_at_ms < ?", now - this.config.autopilotDeliveryTtlMs);
    this.sql.exec(
      "DELETE FROM deliveries WHERE delivery_id NOT IN (SELECT delivery_id FROM deliveries ORDER BY seen_at_ms DESC, delivery_id LIMIT ?)",
      this.config.autopilotDeliveriesMax,
    );
  }

  /** History is bounded by AUTOPILOT_HISTORY_MAX entries (oldest dropped). */
  private remember(entry: TicketHistoryEntry): void {
    this.sql.exec("INSERT INTO history (entry) VALUES (?)", JSON.stringify(entry));
    this.sql.exec("DELETE FROM history WHERE seq NOT IN (SELECT seq FROM history ORDER BY seq DESC LIMIT ?)", this.config.autopilotHistoryMax);
  }

  /** The project's index row follows the ticket (newer wins); a failure is repaired by the next observation. */
  private async project(row: TicketRow): Promise<void> {
    try {
      await this.env.DB.prepare(INDEX_SQL)
        .bind(row.project_id, row.ticket_key, row.org_id, row.number, row.status, row.reasons, row.generation, row.run_id, row.updated_at_ms)
        .run();
    } catch (err) {
      log("autopilot.index_failed", { ticket: row.ticket_key, project: row.project_id, reason: String(err) });
    }
  }

  private serialized<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.tail.then(fn, fn);
    this.tail = next.catch(() => undefined);
    return next;
  }
}
