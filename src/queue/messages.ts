// What travels on the docket-events Queue: outbox events (one per run and sequence number),
// completion-callback attempts and tracker-delivery tries. All share the queue, its retries and
// its dead-letter queue.

import type { Config } from "../config";
import type { Env, OutboxMessage } from "../env";
import { exponentialBackoffMs } from "../lib/backoff";

/** One completion-callback delivery: each delivery of this message is at most one attempt. */
export interface CallbackMessage {
  kind: "callback";
  run_id: string;
  org_id: string;
  /** The sequence number of the run's terminal event, or null for an operator's redelivery. */
  seq: number | null;
  /** The run's attempt (it ended in it), for the log lines; a message sent before it was carried has none. */
  attempt?: number;
}

/** One try of a tracker delivery (src/tracker/deliver.ts): each delivery of this message is at most one try. */
export interface TrackerDeliveryMessage {
  kind: "tracker_delivery";
  run_id: string;
  org_id: string;
  /** The delivery's kind: blocker_comment, review_label, pr_comment or failure_comment. */
  delivery: "blocker_comment" | "review_label" | "pr_comment" | "failure_comment";
  /** The run's attempt when the delivery was asked for, for the log lines. */
  attempt: number;
}

export type QueueMessage = OutboxMessage | CallbackMessage | TrackerDeliveryMessage;

export function isTrackerDeliveryMessage(body: unknown): body is TrackerDeliveryMessage {
  return typeof body === "object" && body !== null && (body as { kind?: unknown }).kind === "tracker_delivery";
}

/** Queues cap a message's delay at 12 hours. */
export const QUEUE_DELAY_MAX_S = 43_200;

export function isCallbackMessage(body: unknown): body is CallbackMessage {
  return typeof body === "object" && body !== null && (body as { kind?: unknown }).kind === "callback";
}

/** Checks every field of an outbox event; a message that fails is retried and then dead-lettered. */
export function parseOutboxMessage(body: unknown): OutboxMessage {
  const b = body as Partial<OutboxMessage> | null;
  const bad = (field: string) => new Error(`not an outbox event: ${field} is missing or malformed`);
  if (typeof b !== "object" || b === null) throw bad("body");
  if (typeof b.run_id !== "string" || b.run_id === "") throw bad("run_id");
  if (typeof b.org_id !== "string" || b.org_id === "") throw bad("org_id");
  if (!Number.isSafeInteger(b.seq) || (b.seq as number) < 1) throw bad("seq");
  if (typeof b.type !== "string" || b.type === "") throw bad("type");
  if (!Number.isSafeInteger(b.at_ms)) throw bad("at_ms");
  if (typeof b.data !== "object" || b.data === null || Array.isArray(b.data)) throw bad("data");
  // A message published before messages carried the attempt takes it from its data.
  if (b.attempt === undefined) return { ...(b as OutboxMessage), attempt: eventAttempt(b.data) };
  if (!Number.isSafeInteger(b.attempt) || (b.attempt as number) < 0) throw bad("attempt");
  return b as OutboxMessage;
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
