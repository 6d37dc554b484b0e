// What one observation of a ticket comes to (../shared/spec/run-lifecycle.md, "Admission"): a
// duplicate delivery, an unchanged ticket, a refusal or a capacity wait kept with its reasons, a
// run admitted (its queue place taken first, its id recorded before it is created), a blocked run
// authorized again by a new human readiness generation, or a lapse of the ticket's run.

import { isRefusal } from "../src/errors";
import { log } from "../src/lib/log";
import { newId } from "../src/lib/crypto";
import { runStub } from "../src/lib/stubs";
import { dispatchRun } from "../src/run/dispatch";
import type { ReadinessResult } from "../src/autopilot/deps";
import type { Observation, ObservationAnswer } from "../src/autopilot/ticket-types";
import { indexTicket, reservePlace, waitingRuns } from "./ticket-index";
import { NO_WITHDRAWAL, type TicketContext, type TicketRow } from "./ticket-store";
import { lapse, unfinishedRun } from "./ticket-withdrawal";

export async function decide(t: TicketContext, obs: Observation): Promise<ObservationAnswer> {
  const now = Date.now();
  if (obs.deliveryId !== null && t.store.seen(obs.deliveryId, now)) {
    return { outcome: "duplicate_delivery", runId: t.store.load()?.run_id ?? null, reasons: [] };
  }
  const stored = t.store.load();
  // The object's name holds the project (ticketObjectName): another project's row cannot be here.
  if (stored && stored.project_id !== obs.project.id) throw new Error(`the ticket ${stored.ticket_key} of ${stored.project_id} was asked about ${obs.project.id}`);
  // Seen in the ready list while the queue is full (src/autopilot/reconcile-waiting.ts): a wait, no read of the issue.
  if (obs.capacityWait !== undefined && !stored?.run_id && !stored?.pending_generation) {
    return refuse(t, obs, stored ?? fresh(obs, now), now, "capacity_wait", [obs.capacityWait], stored?.generation ?? null);
  }
  // An issue never made ready (a comment on any issue of the repository) leaves no ticket behind;
  // a ready label's webhook without a recorded transition is judged (readiness), and its refusal kept.
  if (!stored && !obs.transition && !obs.readiness) return { outcome: "unchanged", runId: null, reasons: [] };
  let row = stored ?? fresh(obs, now);
  if (row.pending_generation !== null) row = await finishAdmission(t, obs, row, now);
  const generation = obs.transition?.eventId ?? row.generation;
  const unfinished = row.run_id ? await unfinishedRun(t, row, obs.door, now) : null;
  if (unfinished) {
    const authorized = obs.eligibility.eligible ? await authorizeBlocked(t, obs, row, unfinished, now) : null;
    if (authorized) return authorized;
    // Eligible again before the withdrawal happened: the ticket backs its run again.
    if (obs.eligibility.eligible) return settle(t, obs, { ...row, ...NO_WITHDRAWAL }, now, { outcome: "already_admitted", runId: unfinished, reasons: [] });
    return lapse(t, obs, row, unfinished, obs.eligibility.reasons, now);
  }
  // A ticket whose run ended stays done until the issue is made ready again (a new ready transition):
  // a comment or an edit after the run moved the issue to review is not a refusal.
  if (row.status === "done" && (!obs.transition || obs.transition.eventId === row.admitted_generation)) {
    return settle(t, obs, { ...row, generation }, now, { outcome: "unchanged", runId: null, reasons: [] });
  }
  if (!obs.eligibility.eligible) return refuse(t, obs, row, now, "refused", obs.eligibility.reasons, generation);
  if (!obs.transition) {
    const reason = obs.readiness && !obs.readiness.ok ? obs.readiness.reason : "the tracker records no addition of the ready label to this issue";
    return refuse(t, obs, row, now, "refused", [reason], generation);
  }
  // The ready transition that already has its run: an edit or a comment changes nothing.
  if (obs.transition.eventId === row.admitted_generation) return sameGeneration(t, obs, row, generation, now);
  const readiness = obs.readiness;
  if (!readiness || !readiness.ok) {
    return refuse(t, obs, row, now, "refused", [readiness ? readiness.reason : "no human readiness evidence"], generation);
  }
  // A disabled or draining project scheduler admits nothing new; reconciliation reconsiders the issue.
  const closed = await schedulerRefusal(t, obs);
  if (closed) return refuse(t, obs, row, now, "refused", [closed], generation);
  if (!(await reservePlace(t.env, obs, row, obs.transition.eventId, now))) {
    const waiting = await waitingRuns(t.env, obs, row);
    const reason = `the project's queue is full: ${waiting} admitted runs wait for a runner (queue capacity ${obs.project.queueCapacity}); reconciliation reconsiders this issue`;
    return refuse(t, obs, row, now, "capacity_wait", [reason], generation);
  }
  return admit(t, obs, row, obs.transition.eventId, readiness, now);
}

/**
 * The ready transition that already had its run, seen again. One whose run was withdrawn when its
 * eligibility lapsed says so, and how to get a new run.
 */
async function sameGeneration(t: TicketContext, obs: Observation, row: TicketRow, generation: string | null, now: number): Promise<ObservationAnswer> {
  if (row.status !== "lapsed") return settle(t, obs, { ...row, generation }, now, { outcome: "unchanged", runId: null, reasons: [] });
  const reason = `eligible again, but this ready label's run was withdrawn when its eligibility lapsed; a person makes the issue ready again (removes and adds its ready label) for a new run`;
  const told: TicketRow = { ...row, generation, reasons: JSON.stringify([reason]), updated_at_ms: now };
  t.store.write(obs, told, now, null);
  await indexTicket(t, told);
  return { outcome: "unchanged", runId: null, reasons: [reason] };
}

/** "scheduler disabled" or "draining" while the project's scheduler stops admission (docs/protocol.md, "Autopilot scheduler"). */
async function schedulerRefusal(t: TicketContext, obs: Observation): Promise<string | null> {
  return t.env.SCHEDULER.get(t.env.SCHEDULER.idFromName(obs.project.orgId)).admissionRefusal(obs.project.id);
}

/**
 * Records the pending generation with the id its run will have, then creates the run under that id
 * through dispatch (the code POST /v1/runs uses), then records the ticket's claim on it. A crash
 * anywhere in between is finished by the next observation with the same id, however much later:
 * the run is found by its id, never by an idempotency key that is taken over after
 * IDEMPOTENCY_KEY_TTL_MS (../shared/spec/run-lifecycle.md, "Admission": at most one unfinished run).
 */
async function admit(t: TicketContext, obs: Observation, row: TicketRow, generation: string, readiness: Extract<ReadinessResult, { ok: true }>, now: number): Promise<ObservationAnswer> {
  if (row.run_id !== null) throw new Error(`the ticket ${row.ticket_key} admits while it names the run ${row.run_id}`);
  const pending: TicketRow = { ...row, pending_generation: generation, run_id: newId("run") };
  t.store.save(pending);
  const runId = await createRun(t, obs, pending);
  const next: TicketRow = { ...pending, status: "admitted", reasons: "[]", generation, admitted_generation: generation, pending_generation: null, updated_at_ms: now };
  t.store.write(obs, next, now, { kind: "admitted", run_id: runId, reasons: [], basis: readiness.basis, actor: readiness.actor });
  await indexTicket(t, next);
  log("autopilot.admitted", { ticket: obs.ticketKey, project: obs.project.id, run_id: runId, generation, door: obs.door, basis: readiness.basis, actor: readiness.actor, reason: "a human ready transition and an eligible issue" });
  return { outcome: "admitted", runId, reasons: [] };
}

/** The pending admission's run, created under the id the ticket recorded, or found again (RunObject.create keeps a run that exists). */
async function createRun(t: TicketContext, obs: Observation, row: TicketRow): Promise<string> {
  const runId = row.run_id;
  if (runId === null) throw new Error(`the ticket ${row.ticket_key} has a pending admission without its run id`);
  await dispatchRun(t.env, row.org_id, obs.dispatch, null, { runId, ticketKey: row.ticket_key, projectId: row.project_id });
  return runId;
}

/**
 * An admission that crashed between recording its run's id and recording the run: the run under
 * that id is found (or created, when the crash came first), and the ticket records its claim on
 * it. The observation then goes on as usual, so a run whose issue has lapsed meanwhile is withdrawn.
 */
async function finishAdmission(t: TicketContext, obs: Observation, row: TicketRow, now: number): Promise<TicketRow> {
  const generation = row.pending_generation!;
  const runId = await createRun(t, obs, row);
  const next: TicketRow = { ...row, status: "admitted", reasons: "[]", admitted_generation: generation, pending_generation: null, updated_at_ms: now };
  const reasons = ["an admission interrupted before the ticket recorded it, finished"];
  t.store.save(next, { at_ms: now, kind: "admitted", door: obs.door, generation, run_id: runId, reasons, basis: null, actor: null });
  await indexTicket(t, next);
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
async function authorizeBlocked(t: TicketContext, obs: Observation, row: TicketRow, runId: string, now: number): Promise<ObservationAnswer | null> {
  const transition = obs.transition;
  const readiness = obs.readiness;
  if (!transition || transition.eventId === row.admitted_generation || !readiness?.ok) return null;
  const run = await runStub(t.env, runId).read(row.org_id);
  if (isRefusal(run) || run.state !== "blocked" || !run.blocker) return null;
  // GitHub records whole seconds: a transition in the blocker's second counts as after it.
  if (transition.atMs < Math.floor(run.blocker.at_ms / 1_000) * 1_000) return null;
  const answer = await runStub(t.env, runId).control(row.org_id, { type: "authorize" });
  if (isRefusal(answer)) return null;
  const generation = transition.eventId;
  const next: TicketRow = { ...row, ...NO_WITHDRAWAL, status: "admitted", reasons: "[]", generation, admitted_generation: generation, updated_at_ms: now };
  const reasons = [`a human readiness change after the blocker (${run.blocker.summary}) requeued the run`];
  t.store.write(obs, next, now, { kind: "authorized", run_id: runId, reasons, basis: readiness.basis, actor: readiness.actor });
  await indexTicket(t, next);
  log("autopilot.authorized", { ticket: obs.ticketKey, project: obs.project.id, run_id: runId, generation, door: obs.door, actor: readiness.actor, reason: reasons[0] });
  return { outcome: "authorized", runId, reasons: [] };
}

/** A refusal (or a capacity wait) is recorded when it differs from the ticket's standing one. */
async function refuse(t: TicketContext, obs: Observation, row: TicketRow, now: number, status: "refused" | "capacity_wait", reasons: string[], generation: string | null): Promise<ObservationAnswer> {
  const outcome = status;
  const changed = row.status !== status || row.reasons !== JSON.stringify(reasons);
  if (!changed) {
    // The index row too: a queue place taken by an admission that did not finish is given back.
    await indexTicket(t, { ...row, generation });
    return settle(t, obs, { ...row, generation }, now, { outcome, runId: null, reasons });
  }
  const next: TicketRow = { ...row, status, reasons: JSON.stringify(reasons), generation, updated_at_ms: now };
  t.store.write(obs, next, now, { kind: status, run_id: null, reasons, basis: null, actor: null });
  await indexTicket(t, next);
  return { outcome, runId: null, reasons };
}

/** Nothing new to record but the delivery id (and a newer generation, if any). */
function settle(t: TicketContext, obs: Observation, row: TicketRow, now: number, answer: ObservationAnswer): ObservationAnswer {
  t.store.write(obs, row, now, null);
  return answer;
}

/** A ticket seen for the first time. */
function fresh(obs: Observation, now: number): TicketRow {
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
