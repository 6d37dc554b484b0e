// When a completion callback round starts: once, when the run's terminal event reaches the outbox
// consumer (an EVENT_EFFECTS entry), and again whenever an operator asks for a redelivery.

import { DocketError, isRefusal, unwrap } from "../errors";
import type { Env, OutboxMessage } from "../env";
import { logRun } from "../lib/log";
import { eventsQueue } from "../queue/messages";
import { runStub } from "../lib/stubs";
import { terminalStateOf } from "../run/states";
import { ensurePending, readDelivery, startRound, type DeliveryRow } from "./deliveries";

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
