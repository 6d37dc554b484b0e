// What travels on the docket-events Queue: outbox events (one per run and sequence number),
// completion-callback attempts and tracker-delivery tries. All share the queue, its retries and
// its dead-letter queue.

import type { Config } from "../config";
import type { Env, OutboxMessage } from "../env";
import { exponentialBackoffMs } from "../lib/backoff";
import { z } from "zod";

/** One completion-callback delivery: each delivery of this message is at most one attempt. */
export const CallbackMessage = z.object({
  kind: z.literal("callback"),
  run_id: z.string().min(1),
  org_id: z.string().min(1),
  /** The sequence number of the run's terminal event, or null for an operator's redelivery. */
  seq: z.int().nullable(),
  /** The run's attempt (it ended in it), for the log lines; a message sent before it was carried has none. */
  attempt: z.int().min(0).optional(),
  /** The attempts the round had made when this message was sent: 0 (absent) but for one the delivery sweep sent again. */
  from_try: z.int().min(0).optional(),
});
export type CallbackMessage = z.infer<typeof CallbackMessage>;

/** One try of a tracker delivery (src/tracker/deliver.ts): each delivery of this message is at most one try. */
export const TrackerDeliveryMessage = z.object({
  kind: z.literal("tracker_delivery"),
  run_id: z.string().min(1),
  org_id: z.string().min(1),
  /** The delivery's kind. */
  delivery: z.enum(["blocker_comment", "review_label", "pr_comment", "failure_comment"]),
  /** The run's attempt when the delivery was asked for, for the log lines. */
  attempt: z.int().min(0),
  /** The tries the delivery had made when this message was sent: 0 (absent) but for one the delivery sweep sent again. */
  from_try: z.int().min(0).optional(),
});
export type TrackerDeliveryMessage = z.infer<typeof TrackerDeliveryMessage>;

/** An outbox event as its producer (the run object's outbox) sends it; `attempt` is absent from messages sent before it was carried. */
const OutboxEvent = z.object({
  run_id: z.string().min(1),
  org_id: z.string().min(1),
  seq: z.int().min(1),
  type: z.string().min(1),
  at_ms: z.int(),
  attempt: z.int().min(0).optional(),
  data: z.record(z.string(), z.unknown()),
}) satisfies z.ZodType<Omit<OutboxMessage, "attempt"> & { attempt?: number }>;

export type QueueMessage = OutboxMessage | CallbackMessage | TrackerDeliveryMessage;

export function isTrackerDeliveryMessage(body: unknown): body is TrackerDeliveryMessage {
  return typeof body === "object" && body !== null && (body as { kind?: unknown }).kind === "tracker_delivery";
}

/** Queues cap a message's delay at 12 hours. */
export const QUEUE_DELAY_MAX_S = 43_200;

export function isCallbackMessage(body: unknown): body is CallbackMessage {
  return typeof body === "object" && body !== null && (body as { kind?: unknown }).kind === "callback";
}

/**
 * A message's body by its schema, or an error naming the first field that is wrong: the consumer
 * retries such a message, and the queue dead-letters it after max_retries.
 */
export function parseMessage<T>(schema: z.ZodType<T>, body: unknown, what: string): T {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const field = parsed.error.issues[0]?.path.join(".") || "body";
  throw new Error(`not ${what}: ${field} is missing or malformed`);
}

/** Checks every field of an outbox event; a message that fails is retried and then dead-lettered. */
export function parseOutboxMessage(body: unknown): OutboxMessage {
  const event = parseMessage(OutboxEvent, body, "an outbox event");
  // A message published before messages carried the attempt takes it from its data.
  return { ...event, attempt: event.attempt ?? eventAttempt(event.data) };
}

/** The run attempt an event happened in: its data says so (the one event stored before it did, run.created, is of attempt 0). */
export function eventAttempt(data: Record<string, unknown>): number {
  return Number.isSafeInteger(data.attempt) ? (data.attempt as number) : 0;
}

/** Delay before the queue delivers a failed message again: base * 2^(attempts-1), capped. */
export function queueRetryDelaySeconds(config: Config, attempts: number): number {
  const ms = exponentialBackoffMs({ baseMs: config.queueRetryBaseMs, maxMs: config.queueRetryMaxMs, maxDoublings: 30 }, attempts - 1);
  return Math.min(QUEUE_DELAY_MAX_S, Math.ceil(ms / 1_000));
}

/** The EVENTS binding carries both kinds of message. */
export function eventsQueue(env: Env): Queue<QueueMessage> {
  return env.EVENTS as unknown as Queue<QueueMessage>;
}
