// The outbox consumer: stores each (run, seq) once however often or in whatever order the Queue
// delivers it, then performs the event's idempotent side effects; and it makes completion-callback
// attempts. Every message is acknowledged or retried on its own; a message that keeps failing goes
// to the dead-letter queue after the queue's max_retries (wrangler.toml)
// (../shared/spec/build-lifecycle.md, "Events and completion retry independently": "Delivery retries
// send the same job/sequence pair, and the application ignores duplicate inserts").

import { drizzle } from "drizzle-orm/d1";
import { deliverCallback } from "../callbacks/deliver";
import { loadConfig, type Config } from "../config";
import { events } from "../db/schema";
import type { Env } from "../env";
import { log } from "../lib/log";
import { performEffects } from "./effects";
import { isCallbackMessage, parseOutboxMessage, queueRetryDelaySeconds } from "./messages";

/** A batch is at most max_batch_size messages (wrangler.toml); each is handled on its own. */
export async function consumeEvents(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const config = loadConfig(env);
  for (const message of batch.messages) {
    if (isCallbackMessage(message.body)) await consumeCallback(message, env, config);
    else await consumeEvent(message, env, config);
  }
}

async function consumeEvent(message: Message<unknown>, env: Env, config: Config): Promise<void> {
  const raw = message.body as { run_id?: unknown; seq?: unknown } | null;
  try {
    const event = parseOutboxMessage(message.body);
    const inserted = await drizzle(env.DB)
      .insert(events)
      .values({
        runId: event.run_id,
        seq: event.seq,
        orgId: event.org_id,
        type: event.type,
        data: JSON.stringify(event.data),
        atMs: event.at_ms,
        receivedAtMs: Date.now(),
      })
      .onConflictDoNothing()
      .run();
    // Effects run for a duplicate too: the delivery that stored the event may have failed in them.
    await performEffects(env, event);
    message.ack();
    log("outbox.consumed", {
      run: event.run_id,
      seq: event.seq,
      type: event.type,
      attempt: message.attempts,
      reason: inserted.meta.changes > 0 ? "stored" : "duplicate",
    });
  } catch (err) {
    const delaySeconds = queueRetryDelaySeconds(config, message.attempts);
    message.retry({ delaySeconds });
    log("outbox.consume_failed", {
      run: raw?.run_id ?? null,
      seq: raw?.seq ?? null,
      attempt: message.attempts,
      reason: String(err),
      retry_in_s: delaySeconds,
    });
  }
}

async function consumeCallback(message: Message<unknown>, env: Env, config: Config): Promise<void> {
  if (!isCallbackMessage(message.body)) return;
  const body = message.body;
  try {
    const outcome = await deliverCallback(env, config, body, message.attempts);
    if (outcome.ack) message.ack();
    else message.retry({ delaySeconds: outcome.delaySeconds });
  } catch (err) {
    // The receiver's failures are values; this is Docket's own (D1 or the run object unreachable).
    const delaySeconds = queueRetryDelaySeconds(config, message.attempts);
    message.retry({ delaySeconds });
    log("callback.consume_failed", { run: body.run_id, seq: body.seq, attempt: message.attempts, reason: String(err), retry_in_s: delaySeconds });
  }
}
