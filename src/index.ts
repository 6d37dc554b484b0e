// The Worker entry: HTTP app, outbox queue consumer and the cron sweep.

import { app } from "./app";
import { loadConfig } from "./config";
import type { Env, OutboxMessage } from "./env";
import { consumeEvents } from "./queue/consumer";
import { tickSweep } from "./sweep";

export { RunObject } from "../durable-objects/run-object";
export { SchedulerObject } from "../durable-objects/scheduler-object";

export default {
  fetch: app.fetch,
  async queue(batch: MessageBatch<OutboxMessage>, env: Env): Promise<void> {
    await consumeEvents(batch, env);
  },
  async scheduled(controller: ScheduledController, env: Env): Promise<void> {
    await tickSweep(env.DB, loadConfig(env), controller.scheduledTime);
  },
} satisfies ExportedHandler<Env, OutboxMessage>;
