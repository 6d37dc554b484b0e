// The outbox consumer: stores each (run, seq) once however often or in whatever order the Queue
// delivers it, and acknowledges message by message; a message it cannot handle is retried and,
// after the queue's max_retries, goes to the dead-letter queue.

import { drizzle } from "drizzle-orm/d1";
import { events } from "../db/schema";
import type { Env, OutboxMessage } from "../env";
import { log } from "../lib/log";
import { performEffects } from "./effects";

export async function consumeEvents(batch: MessageBatch<OutboxMessage>, env: Env): Promise<void> {
  const db = drizzle(env.DB);
  for (const message of batch.messages) {
    const body = message.body;
    try {
      if (!body || typeof body.run_id !== "string" || !Number.isInteger(body.seq)) {
        throw new Error("not an outbox event");
      }
      await db
        .insert(events)
        .values({
          runId: body.run_id,
          seq: body.seq,
          orgId: body.org_id,
          type: body.type,
          data: JSON.stringify(body.data),
          atMs: body.at_ms,
          receivedAtMs: Date.now(),
        })
        .onConflictDoNothing();
      await performEffects(env, body);
      message.ack();
    } catch (err) {
      log("outbox.consume_failed", { run: body?.run_id, seq: body?.seq, attempts: message.attempts, error: String(err) });
      message.retry();
    }
  }
}
