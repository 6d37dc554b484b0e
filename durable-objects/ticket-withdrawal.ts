// The run a ticket backs, and how that ends: the answer to a claim of it, the run's end recorded
// once, and a lapse, the run withdrawn when its issue is no longer eligible (retried from the
// ticket's alarm a bounded number of times).

import { isRefusal } from "../src/errors";
import { log } from "../src/lib/log";
import { runStub } from "../src/lib/stubs";
import { isTerminal } from "../src/run/states";
import type { BackingAnswer, Observation, ObservationAnswer, TicketHistoryEntry } from "../src/autopilot/ticket-types";
import { indexTicket } from "./ticket-index";
import { NO_WITHDRAWAL, type TicketContext, type TicketRow } from "./ticket-store";

/** What a withdrawal of the ticket's queued run came to. */
type WithdrawOutcome = "withdrawn" | "handed_out" | "failed";

/** The run is backed while it is the ticket's run and no lapse of it is recorded (TicketObject.backs). */
export function backing(row: TicketRow | null, runId: string): BackingAnswer {
  if (!row) return { backs: false, reason: "no ticket records this run" };
  if (row.withdraw_run_id === runId) return { backs: false, reason: row.withdraw_reason ?? "eligibility lapsed" };
  // An admission interrupted before it recorded its run: the next observation settles it.
  if (row.run_id === runId && row.pending_generation !== null) return { backs: "unknown", reason: "the ticket's admission of its run is unfinished" };
  if (row.run_id === runId) return { backs: true };
  const reasons = JSON.parse(row.reasons) as string[];
  if (row.status === "lapsed" && reasons.length > 0) return { backs: false, reason: `eligibility lapsed: ${reasons.join("; ")}` };
  return { backs: false, reason: `the ticket ${row.ticket_key} no longer backs this run (its run: ${row.run_id ?? "none"}, status ${row.status})` };
}

/** The ticket's run id while that run has not ended; an ended run frees the ticket (recorded once). */
export async function unfinishedRun(t: TicketContext, row: TicketRow, door: TicketHistoryEntry["door"], now: number): Promise<string | null> {
  const runId = row.run_id!;
  const run = await runStub(t.env, runId).read(row.org_id);
  if (!isRefusal(run) && !isTerminal(run.state)) return runId;
  const reason = isRefusal(run) ? `the run is gone: ${run.error.message}` : `the run ended ${run.state}`;
  const next: TicketRow = { ...row, ...NO_WITHDRAWAL, status: "done", reasons: JSON.stringify([reason]), run_id: null, updated_at_ms: now };
  t.store.save(next, { at_ms: now, kind: "run_ended", door, generation: row.admitted_generation, run_id: runId, reasons: [reason], basis: null, actor: null });
  Object.assign(row, next);
  await indexTicket(t, next);
  return null;
}

/**
 * The ticket no longer backs its queued run: the lapse is recorded first (from then on a claim of
 * the run is refused and the run cancelled, RunObject.claimCounted), then the run is withdrawn.
 * A failed withdrawal is retried from the alarm; a crash in between is caught by the claim.
 */
export async function lapse(t: TicketContext, obs: Observation, row: TicketRow, runId: string, reasons: string[], now: number): Promise<ObservationAnswer> {
  const reason = `eligibility lapsed: ${reasons.join("; ")}`;
  const pending: TicketRow = { ...row, reasons: JSON.stringify(reasons), withdraw_run_id: runId, withdraw_reason: reason, withdraw_attempts: 0 };
  t.store.write(obs, pending, now, null);
  // Armed before the withdrawal: a crash right after the record still has it retried.
  await t.setAlarm(now + t.config.autopilotWithdrawRetryMs);
  const outcome = await withdrawLapsed(t, pending, obs.door, now);
  if (outcome === "handed_out") return { outcome: "already_admitted", runId, reasons };
  return { outcome: "lapsed", runId, reasons };
}

/**
 * Withdraws the run of a recorded lapse. Withdrawn (or already ended, e.g. cancelled by a claim's
 * check): the lapse is complete. Already handed out: the run goes on and the ticket keeps its
 * claim. Failed: retried from the alarm after AUTOPILOT_WITHDRAW_RETRY_MS * 2^(n-1), a bounded number of times.
 */
export async function withdrawLapsed(t: TicketContext, row: TicketRow, door: TicketHistoryEntry["door"], now: number): Promise<WithdrawOutcome> {
  const runId = row.withdraw_run_id!;
  const reason = row.withdraw_reason ?? "eligibility lapsed";
  let answer: Awaited<ReturnType<ReturnType<typeof runStub>["withdraw"]>> | null = null;
  let failure: string | null = null;
  try {
    answer = await runStub(t.env, runId).withdraw(row.org_id, reason);
    if (isRefusal(answer)) failure = `${answer.error.code}: ${answer.error.message}`;
  } catch (err) {
    failure = String(err);
  }
  if (failure !== null || answer === null || isRefusal(answer)) {
    await withdrawFailed(t, row, failure ?? "no answer", now);
    return "failed";
  }
  if (!answer.withdrawn && !isTerminal(answer.run.state)) {
    // Already handed out: the run goes on; the ticket keeps its claim and notes nothing more.
    t.store.save({ ...row, ...NO_WITHDRAWAL });
    return "handed_out";
  }
  const reasons = JSON.parse(row.reasons) as string[];
  const next: TicketRow = { ...row, ...NO_WITHDRAWAL, status: "lapsed", run_id: null, updated_at_ms: now };
  t.store.save(next, { at_ms: now, kind: "lapsed", door, generation: row.generation, run_id: runId, reasons, basis: null, actor: null });
  await indexTicket(t, next);
  log("autopilot.lapsed", { ticket: row.ticket_key, project: row.project_id, run_id: runId, door, reason });
  return "withdrawn";
}

async function withdrawFailed(t: TicketContext, row: TicketRow, failure: string, now: number): Promise<void> {
  const attempts = row.withdraw_attempts + 1;
  t.store.save({ ...row, withdraw_attempts: attempts });
  const max = t.config.autopilotWithdrawAttemptsMax;
  if (attempts >= max) {
    // The claim's check still keeps the run from starting; the next observation tries again.
    log("autopilot.withdraw_abandoned", { ticket: row.ticket_key, run_id: row.withdraw_run_id, attempts, reason: failure });
    return;
  }
  const at = now + t.config.autopilotWithdrawRetryMs * 2 ** (attempts - 1);
  await t.setAlarm(at);
  log("autopilot.withdraw_failed", { ticket: row.ticket_key, run_id: row.withdraw_run_id, attempts, retry_at_ms: at, reason: failure });
}
