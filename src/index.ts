// The Worker entry: HTTP app, outbox queue consumer and the cron sweep (the watermark tick and
// the alarm backstop and the reconciliation of unconfirmed build dispatches).

import { checkRunAlarms } from "./alarm-backstop";
import { app } from "./app";
import { reconcileUnconfirmedJobs } from "./builds/dispatcher";
import { loadConfig } from "./config";
import type { Env } from "./env";
import type { QueueMessage } from "./queue/messages";
import { consumeEvents } from "./queue/consumer";
import { pruneStorage } from "./retention";
import { tickSweep } from "./sweep";

export { RunObject } from "../durable-objects/run-object";
export { SchedulerObject } from "../durable-objects/scheduler-object";

export default {
  fetch: app.fetch,
  async queue(batch: MessageBatch<QueueMessage>, env: Env): Promise<void> {
    await consumeEvents(batch, env);
  },
  async scheduled(controller: ScheduledController, env: Env): Promise<void> {
    const config = loadConfig(env);
    const { recoveredAtMs } = await tickSweep(env.DB, config, controller.scheduledTime);
    // Runs whose alarm or queue row a crash lost are found and re-armed here (docs/runbook.md).
    await checkRunAlarms(env, config, controller.scheduledTime, recoveredAtMs);
    // Build jobs whose dispatch was never confirmed are retried here (docs/runbook.md).
    await reconcileUnconfirmedJobs(env, config, controller.scheduledTime);
    // Bounded storage: expired idempotency keys and old events of ended runs, a batch per tick.
    await pruneStorage(env, config, controller.scheduledTime);
  },
} satisfies ExportedHandler<Env, QueueMessage>;
