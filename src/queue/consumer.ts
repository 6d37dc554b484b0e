// The outbox consumer: stores each (run, seq) once however often or in whatever order the Queue
// delivers it, then performs the event's idempotent side effects; and it makes completion-callback
// attempts. Every message is acknowledged or retried on its own; a message that keeps failing goes
// to the dead-letter queue after the queue's max_retries (wrangler.toml)
// (../shared/spec/build-lifecycle.md, "Events and completion retry independently": "Delivery retries
// send the same job/sequence pair, and the application ignores duplicate inserts").

import type { z } from "zod";
import { deliverCallback } from "../callbacks/deliver";
import { loadConfig, type Config } from "../config";
import type { Env, OutboxMessage } from "../env";
import { log, logRun } from "../lib/log";
import type { DeliveryOutcome } from "./delivery";
import { performEffects } from "./effects";
import { insertEvent } from "./store";
import { isRefusal } from "../errors";
import { runStub } from "../lib/stubs";
import { CallbackMessage, eventAttempt, isCallbackMessage, isTrackerDeliveryMessage, parseMessage, parseOutboxMessage, queueRetryDelaySeconds, TrackerDeliveryMessage } from "./messages";
import { deliverToTracker } from "../tracker/deliver";

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** An event message of the batch, parsed, with its insert statement. */
interface Stored {
  message: Message<unknown>;
  event: OutboxMessage;
  insert: D1PreparedStatement;
}

/**
 * A batch is at most max_batch_size messages (wrangler.toml); each is acknowledged or retried on its
 * own. Its events are stored in one D1 batch first (one round trip, not one per event); when that
 * batch fails, each event is stored on its own, so one bad event never holds the others back.
 */
export async function consumeEvents(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const config = loadConfig(env);
  const stored = storeTogether(batch.messages, env);
  for (const message of batch.messages) {
    if (isCallbackMessage(message.body)) await consumeCallback(message, env, config);
    else if (isTrackerDeliveryMessage(message.body)) await consumeTrackerDelivery(message, env, config);
    else await consumeEvent(message, env, config, stored);
  }
}

/** The event messages' inserts as one D1 batch; resolves to each message's outcome, or null when the batch failed. */
function storeTogether(messages: readonly Message<unknown>[], env: Env): Promise<Map<Message<unknown>, D1Result> | null> {
  const parsed: Stored[] = [];
  for (const message of messages) {
    if (isCallbackMessage(message.body) || isTrackerDeliveryMessage(message.body)) continue;
    const event = tryParse(message.body);
    if (event) parsed.push({ message, event, insert: insertEvent(env.DB, event) });
  }
  if (parsed.length === 0) return Promise.resolve(new Map());
  return env.DB.batch(parsed.map((p) => p.insert)).then(
    (results) => new Map(parsed.map((p, i) => [p.message, results[i]])),
    (err) => {
      log("outbox.batch_store_failed", { count: parsed.length, reason: `each event is stored on its own: ${String(err)}` });
      return null;
    },
  );
}

function tryParse(body: unknown): OutboxMessage | null {
  try {
    return parseOutboxMessage(body);
  } catch {
    return null;
  }
}

async function consumeEvent(message: Message<unknown>, env: Env, config: Config, together: Promise<Map<Message<unknown>, D1Result> | null>): Promise<void> {
  const raw = message.body as { run_id?: unknown; seq?: unknown; attempt?: unknown; data?: unknown } | null;
  try {
    const event = parseOutboxMessage(message.body);
    const inserted = (await together)?.get(message) ?? (await insertEvent(env.DB, event).run());
    // Effects run for a duplicate too: the delivery that stored the event may have failed in them.
    await performEffects(env, event);
    message.ack();
    logRun("outbox.consumed", {
      run: event.run_id,
      attempt: event.attempt,
      seq: event.seq,
      type: event.type,
      try: message.attempts,
      reason: inserted.meta.changes > 0 ? "stored" : "duplicate",
    });
  } catch (err) {
    const delaySeconds = retryLater(message, config);
    const failed = { try: message.attempts, reason: String(err), retry_in_s: delaySeconds };
    // A message too malformed to name its run and attempt is logged as such.
    if (typeof raw?.run_id === "string") {
      const attempt = Number.isSafeInteger(raw.attempt) ? (raw.attempt as number) : eventAttempt(isRecord(raw.data) ? raw.data : {});
      logRun("outbox.consume_failed", { run: raw.run_id, attempt, seq: Number.isSafeInteger(raw.seq) ? (raw.seq as number) : null, ...failed });
    } else log("outbox.consume_failed", failed);
  }
}

async function consumeCallback(message: Message<unknown>, env: Env, config: Config): Promise<void> {
  let body = parsedOrRetried(message, config, CallbackMessage, "a callback message", "callback.consume_failed");
  if (!body) return;
  try {
    const withAttempt = await withRunAttempt(env, body);
    body = withAttempt;
    answerDelivery(message, await deliverCallback(env, config, withAttempt, message.attempts));
  } catch (err) {
    // The receiver's failures are values; this is Docket's own (D1 or the run object unreachable).
    const delaySeconds = retryLater(message, config);
    const failed = { seq: body.seq, try: message.attempts, reason: String(err), retry_in_s: delaySeconds };
    if (body.attempt === undefined) log("callback.consume_failed", { ...failed, run_id: body.run_id });
    else logRun("callback.consume_failed", { run: body.run_id, attempt: body.attempt, ...failed });
  }
}

/** One try of a tracker delivery; Docket's own failure (D1 unreachable) retries the message. */
async function consumeTrackerDelivery(message: Message<unknown>, env: Env, config: Config): Promise<void> {
  const body = parsedOrRetried(message, config, TrackerDeliveryMessage, "a tracker delivery message", "tracker_delivery.consume_failed");
  if (!body) return;
  try {
    answerDelivery(message, await deliverToTracker(env, config, body, message.attempts));
  } catch (err) {
    const delaySeconds = retryLater(message, config);
    logRun("tracker_delivery.consume_failed", { run: body.run_id, attempt: body.attempt, kind: body.delivery, try: message.attempts, reason: String(err), retry_in_s: delaySeconds });
  }
}

/** Has the queue deliver the message again after QUEUE_RETRY_* (Docket's own failure, or a malformed body); the delay, for the log. */
function retryLater(message: Message<unknown>, config: Config): number {
  const delaySeconds = queueRetryDelaySeconds(config, message.attempts);
  message.retry({ delaySeconds });
  return delaySeconds;
}

/** Acknowledges a delivery's message, or has the queue retry it, as the delivery's outcome says. */
function answerDelivery(message: Message<unknown>, outcome: DeliveryOutcome): void {
  if (outcome.ack) message.ack();
  else message.retry({ delaySeconds: outcome.delaySeconds });
}

/** The message's body by its schema; a body the schema refuses is retried like any failure (dead-lettered after max_retries), and null. */
function parsedOrRetried<T>(message: Message<unknown>, config: Config, schema: z.ZodType<T>, what: string, failedMsg: string): T | null {
  try {
    return parseMessage(schema, message.body, what);
  } catch (err) {
    const delaySeconds = retryLater(message, config);
    log(failedMsg, { try: message.attempts, reason: String(err), retry_in_s: delaySeconds });
    return null;
  }
}

/** A callback message sent before messages carried the run's attempt gets it from the run. */
async function withRunAttempt(env: Env, body: CallbackMessage): Promise<CallbackMessage & { attempt: number }> {
  if (body.attempt !== undefined) return body as CallbackMessage & { attempt: number };
  const run = await runStub(env, body.run_id).read(body.org_id);
  return { ...body, attempt: isRefusal(run) ? 0 : run.attempt };
}
