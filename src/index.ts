// The Worker entry: HTTP app, the queue consumers (outbox events, autopilot deliveries) and the cron
// tick (the sweep watermark, the alarm backstop, the reconciliation of build jobs, the resending of
// deliveries whose queue message was lost, storage retention, managed runner pools' scaling and
// autopilot reconciliation).

import { checkRunAlarms } from "./alarm-backstop";
import { app } from "./app";
import { reconcileUnconfirmedJobs, settleEndedJobs } from "./builds/reconcile";
import { loadConfig } from "./config";
import type { Env } from "./env";
import { log } from "./lib/log";
import type { QueueMessage } from "./queue/messages";
import { consumeEvents } from "./queue/consumer";
import { recoverPublications } from "./publication-recovery";
import { recoveryPass } from "./recovery";
import { pruneStorage } from "./retention";
import { tickSweep } from "./sweep";
import { resendOverdueTrackerDeliveries } from "./tracker/deliver";
import { resendOverdueCallbacks } from "./callbacks/schedule";
import { AUTOPILOT_QUEUE, consumeAutopilot } from "./autopilot/queue";
import { reconcileTick } from "./autopilot/reconcile";
import { scalePools } from "./managed/scaler";

export { RunObject } from "../durable-objects/run-object";
export { SchedulerObject } from "../durable-objects/scheduler-object";
export { TicketObject } from "../durable-objects/ticket-object";
export { ManagedRunner } from "../durable-objects/managed-runner";
// The Containers runtime hands a managed runner's outbound HTTP to this entrypoint (durable-objects/managed-runner.ts).
export { ContainerProxy } from "@cloudflare/containers";

/** One step of the cron tick: a failure is logged and left to the next tick, never stops the others. */
async function step(name: string, work: () => Promise<unknown>): Promise<void> {
  try {
    await work();
  } catch (err) {
    log("cron.step_failed", { step: name, reason: String(err) });
  }
}

export default {
  fetch: app.fetch,
  async queue(batch: MessageBatch<QueueMessage>, env: Env): Promise<void> {
    // One handler for every queue: autopilot deliveries by their queue's name, the outbox otherwise.
    if (batch.queue === AUTOPILOT_QUEUE) await consumeAutopilot(batch, env);
    else await consumeEvents(batch, env);
  },
  async scheduled(controller: ScheduledController, env: Env): Promise<void> {
    const config = loadConfig(env);
    const now = controller.scheduledTime;
    // Without a watermark (D1 down), the backstop grants every run its window from now.
    let graceFromMs = now;
    await step("sweep", async () => ({ recoveredAtMs: graceFromMs } = await tickSweep(env.DB, config, now, env.CF_VERSION_METADATA?.id ?? null)));
    // After an outage or a deploy, unfinished runs are reconciled before anything is dispatched (src/recovery.ts).
    let recoveryEpochMs = 0;
    await step("recovery", async () => ({ epochMs: recoveryEpochMs } = await recoveryPass(env, config)));
    // Pending publications are reconciled before anything else moves, but not twice in one recovery (src/publication-recovery.ts).
    await step("publication_recovery", () => recoverPublications(env, config, graceFromMs, recoveryEpochMs));
    // Runs whose alarm or queue row a crash lost are found and re-armed here (docs/runbook.md).
    await step("alarm_backstop", () => checkRunAlarms(env, config, now, graceFromMs));
    // Build jobs whose dispatch was never confirmed are retried, and jobs whose run ended without
    // settling them are settled (docs/runbook.md).
    await step("reconcile_unconfirmed", () => reconcileUnconfirmedJobs(env, config, now));
    await step("settle_ended", () => settleEndedJobs(env, config, now));
    // Tracker deliveries and completion callbacks whose queue message was lost are sent again, a bounded batch per tick.
    await step("tracker_delivery_sweep", () => resendOverdueTrackerDeliveries(env, config, now));
    await step("callback_sweep", () => resendOverdueCallbacks(env, config, now));
    // Bounded storage: expired idempotency keys and old events of ended runs, a batch per tick.
    await step("retention", () => pruneStorage(env, config, now));
    // Managed runner pools start, replace and halt their containers (docs/managed-runners.md).
    await step("managed_pools", () => scalePools(env, config, now));
    // Autopilot admission's guarantee, last (it waits on the tracker): each project's ready issues are
    // walked again, a bounded step per tick; the first tick after an outage (the sweep recorded a
    // recovery now) restarts every pass.
    await step("autopilot_reconcile", () => reconcileTick(env, config, graceFromMs === now));
  },
} satisfies ExportedHandler<Env, QueueMessage>;
