// When a completion callback round starts: once, when the run's terminal event reaches the outbox
// consumer (an EVENT_EFFECTS entry), and again whenever an operator asks for a redelivery; and when
// the cron's delivery sweep finds a round whose queue message was lost.

import { DocketError, isRefusal, unwrap } from "../errors";
import type { Env, OutboxMessage } from "../env";
import { log, logRun } from "../lib/log";
import { eventsQueue } from "../queue/messages";
import { runStub } from "../lib/stubs";
import { terminalStateOf } from "../run/states";
import type { Config } from "../config";
import { ensurePending, overdueCallbacks, readDelivery, startRound, type DeliveryRow } from "./deliveries";

/**
 * Starts the callback of a run that ended. Idempotent, as every event handler must be: a round that
 * already made an attempt (or finished) is left alone, so a redelivered end event sends nothing twice.
 */
export async function scheduleCompletionCallback(env: Env, event: OutboxMessage): Promise<void> {
  const to = terminalStateOf(event);
  if (!to) return;
  const run = await runStub(env, event.run_id).read(event.org_id);
  if (isRefusal(run)) {
    logRun("callback.skipped", { run: event.run_id, attempt: event.attempt, seq: event.seq, reason: `the run could not be read: ${run.error.code}` });
    return;
  }
  if (!run.callback_url) return;
  const row = await ensurePending(env.DB, { runId: run.id, orgId: run.org_id, url: run.callback_url, now: Date.now() });
  if (row.status !== "pending" || row.attempts > 0) return;
  await eventsQueue(env).send({ kind: "callback", run_id: run.id, org_id: run.org_id, seq: event.seq, attempt: run.attempt }, { contentType: "json" });
  logRun("callback.scheduled", { run: run.id, attempt: run.attempt, seq: event.seq, try: 0, reason: `run ended ${to}` });
}

/** An operator's redelivery: a new round of attempts for a run that ended, whatever the last round did. */
export async function redeliverCallback(env: Env, orgId: string, runId: string, by: string): Promise<DeliveryRow> {
  const run = unwrap(await runStub(env, runId).read(orgId));
  if (!run.callback_url) {
    throw new DocketError("invalid_transition", "this run was dispatched without a callback_url", { state: run.state });
  }
  if (run.ended_at_ms === null) {
    throw new DocketError("invalid_transition", "the run has not ended; its callback is sent when it does", { state: run.state });
  }
  await startRound(env.DB, { runId, orgId, url: run.callback_url, now: Date.now() });
  await eventsQueue(env).send({ kind: "callback", run_id: runId, org_id: orgId, seq: null, attempt: run.attempt }, { contentType: "json" });
  logRun("callback.redelivery", { run: runId, attempt: run.attempt, seq: null, by, try: 0, reason: "operator redelivery" });
  const row = await readDelivery(env.DB, runId);
  if (!row) throw new DocketError("internal", "callback delivery vanished");
  return row;
}

/**
 * The cron's sweep of callbacks whose queue message was lost (pending, next attempt overdue by more
 * than DELIVERY_STALE_MS): each gets a message for its next attempt, at most DELIVERY_SWEEP_MAX a
 * tick. A message that was only late makes no second attempt: the attempt count's compare-and-swap
 * lets one of the two messages make it, and the other is a duplicate. The completion is retried on
 * its own until delivered or failed (../shared/spec/build-lifecycle.md, "Events and completion retry
 * independently"), so a lost message must not end its round.
 */
export async function resendOverdueCallbacks(env: Env, config: Config, now: number): Promise<number> {
  const rows = await overdueCallbacks(env.DB, config, now);
  for (const row of rows) {
    await eventsQueue(env).send({ kind: "callback", run_id: row.runId, org_id: row.orgId, seq: null, ...(row.attempts > 0 ? { from_try: row.attempts } : {}) }, { contentType: "json" });
    const overdueSinceMs = row.lastAttemptAtMs ?? row.createdAtMs;
    log("callback.resent", { run_id: row.runId, try: row.attempts, reason: `pending with no attempt since ${new Date(overdueSinceMs).toISOString()}: its queue message was lost` });
  }
  return rows.length;
}
