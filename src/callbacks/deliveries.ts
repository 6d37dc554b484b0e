// The receipt of a completion callback: one D1 row per run (callback_deliveries), pending until a
// receiver answered 2xx (delivered) or the attempts of the round ran out (failed); its attempts are
// counted and recorded the way every delivery's are (src/queue/delivery.ts).

import { eq, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Config } from "../config";
import { callbackDeliveries } from "../db/schema";
import { claimNext, giveUp, overdueReceipts, recordEnd, type DeliveryRound, type DeliveryStatus, type ReceiptTable } from "../queue/delivery";

export type DeliveryRow = typeof callbackDeliveries.$inferSelect;

export async function readDelivery(db: D1Database, runId: string): Promise<DeliveryRow | null> {
  return (await drizzle(db).select().from(callbackDeliveries).where(eq(callbackDeliveries.runId, runId)).get()) ?? null;
}

/** A run's delivery as a round starts: pending, no attempt made. */
function roundStart(row: { runId: string; orgId: string; url: string; now: number }) {
  return { runId: row.runId, orgId: row.orgId, url: row.url, status: "pending" as const, attempts: 0, createdAtMs: row.now };
}

/** Creates the pending delivery of a run that ended; an existing one is left as it is. */
export async function ensurePending(db: D1Database, row: { runId: string; orgId: string; url: string; now: number }): Promise<DeliveryRow> {
  await drizzle(db)
    .insert(callbackDeliveries)
    .values(roundStart(row))
    .onConflictDoNothing();
  const current = await readDelivery(db, row.runId);
  if (!current) throw new Error(`callback delivery of ${row.runId} vanished`);
  return current;
}

/** An operator's redelivery: a new round of attempts, whatever the last round ended as. */
export async function startRound(db: D1Database, row: { runId: string; orgId: string; url: string; now: number }): Promise<void> {
  await drizzle(db)
    .insert(callbackDeliveries)
    .values(roundStart(row))
    .onConflictDoUpdate({
      target: callbackDeliveries.runId,
      set: { status: "pending", attempts: 0, url: row.url, deliveredAtMs: null },
    });
}

/** The receipts of callbacks: a round counts its attempts in `attempts`. */
const RECEIPTS: ReceiptTable<typeof callbackDeliveries> = {
  table: callbackDeliveries,
  count: callbackDeliveries.attempts,
  lastAttemptAtMs: callbackDeliveries.lastAttemptAtMs,
  counted: (now) => ({ attempts: sql`${callbackDeliveries.attempts} + 1`, lastAttemptAtMs: now }),
};

/** Claims attempt `expected + 1` of the run's callback (claimNext); null when another delivery took it. */
export function claimAttempt(db: D1Database, runId: string, expected: number, now: number): Promise<number | null> {
  return claimNext(db, RECEIPTS, eq(callbackDeliveries.runId, runId), expected, now);
}

/** Records how attempt `attempt` went, unless a redelivery started a new round meanwhile. */
export async function recordAttempt(
  db: D1Database,
  runId: string,
  attempt: number,
  result: { status: DeliveryStatus; error: string | null; statusCode: number | null; now: number },
): Promise<void> {
  await recordEnd(db, RECEIPTS, eq(callbackDeliveries.runId, runId), attempt, result, { lastStatusCode: result.statusCode });
}

/** Gives up on a round whose attempts are spent (giveUp). */
export async function markFailed(db: D1Database, runId: string, expected: number, error: string): Promise<void> {
  await giveUp(db, RECEIPTS, eq(callbackDeliveries.runId, runId), expected, error);
}

/**
 * Pending callbacks whose next attempt is overdue by more than DELIVERY_STALE_MS (their queue
 * message was lost), the longest overdue first, at most DELIVERY_SWEEP_MAX.
 */
export function overdueCallbacks(db: D1Database, config: Config, now: number): Promise<DeliveryRow[]> {
  return overdueReceipts(db, RECEIPTS, callbackRound(config), { staleMs: config.deliveryStaleMs, max: config.deliverySweepMax }, now);
}

/**
 * The `callback` field of a run (GET /v1/runs/:id): null without a callback_url; `waiting` until
 * the run has ended and its end event reached the consumer.
 */
export function callbackView(callbackUrl: string | null, row: DeliveryRow | null, config: Config) {
  const url = row?.url ?? callbackUrl;
  if (!url) return null;
  return {
    url,
    status: row?.status ?? ("waiting" as const),
    attempts: row?.attempts ?? 0,
    max_attempts: config.callbackMaxAttempts,
    last_error: row?.lastError ?? null,
    last_status_code: row?.lastStatusCode ?? null,
    last_attempt_at_ms: row?.lastAttemptAtMs ?? null,
    delivered_at_ms: row?.deliveredAtMs ?? null,
    created_at_ms: row?.createdAtMs ?? null,
  };
}

export type CallbackView = ReturnType<typeof callbackView>;

/** A callback's round: CALLBACK_MAX_ATTEMPTS attempts, CALLBACK_BACKOFF_* between them. */
export function callbackRound(config: Config): DeliveryRound {
  return { maxAttempts: config.callbackMaxAttempts, backoff: { baseMs: config.callbackBackoffBaseMs, maxMs: config.callbackBackoffMaxMs } };
}
