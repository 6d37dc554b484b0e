// The receipt of a tracker delivery: one D1 row per (run, kind) (tracker_deliveries), pending
// until the tracker confirmed it (delivered) or its tries ran out (failed); its tries are counted
// and recorded the way every delivery's are (src/queue/delivery.ts), and a delivered kind is never
// sent again.

import { and, asc, eq, inArray, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Config } from "../config";
import { trackerDeliveries } from "../db/tracker-schema";
import { readInBatches } from "../lib/d1-batches";
import { claimNext, giveUp, overdueReceipts, recordEnd, type DeliveryRound, type DeliveryStatus, type ReceiptTable } from "../queue/delivery";
import type { CommentReceipt } from "../autopilot/provider";
import type { DeliveryKind, DeliveryRequest } from "../run/ticket-requests";

export type TrackerDeliveryRow = typeof trackerDeliveries.$inferSelect;

const key = (runId: string, kind: DeliveryKind) => and(eq(trackerDeliveries.runId, runId), eq(trackerDeliveries.kind, kind));

export async function readTrackerDelivery(db: D1Database, runId: string, kind: DeliveryKind): Promise<TrackerDeliveryRow | null> {
  return (await drizzle(db).select().from(trackerDeliveries).where(key(runId, kind)).get()) ?? null;
}

/** A run's deliveries (at most one per kind), in the order they were asked for. */
export async function listTrackerDeliveries(db: D1Database, runId: string): Promise<TrackerDeliveryRow[]> {
  return drizzle(db).select().from(trackerDeliveries).where(eq(trackerDeliveries.runId, runId)).orderBy(asc(trackerDeliveries.createdAtMs)).all();
}

/** The deliveries of several runs (a page of an autopilot project's runs), by run, each run's in the order they were asked for. */
export async function listTrackerDeliveriesOf(db: D1Database, runIds: string[]): Promise<Map<string, TrackerDeliveryRow[]>> {
  const byRun = new Map<string, TrackerDeliveryRow[]>(runIds.map((id) => [id, []]));
  const rows = await readInBatches(runIds, (batch) => drizzle(db).select().from(trackerDeliveries).where(inArray(trackerDeliveries.runId, batch)).orderBy(asc(trackerDeliveries.createdAtMs)).all());
  for (const row of rows) byRun.get(row.runId)?.push(row);
  return byRun;
}

/** Records the request as pending; an existing receipt of the same kind is left as it is. */
export async function recordRequest(db: D1Database, row: { runId: string; orgId: string; request: DeliveryRequest; now: number }): Promise<TrackerDeliveryRow> {
  await drizzle(db)
    .insert(trackerDeliveries)
    .values({
      runId: row.runId,
      kind: row.request.kind,
      orgId: row.orgId,
      projectId: row.request.project_id,
      ticketKey: row.request.ticket_key,
      request: JSON.stringify(row.request),
      status: "pending",
      tries: 0,
      createdAtMs: row.now,
    })
    .onConflictDoNothing();
  const current = await readTrackerDelivery(db, row.runId, row.request.kind);
  if (!current) throw new Error(`tracker delivery ${row.request.kind} of ${row.runId} vanished`);
  return supersedes(row.request, current) ? supersede(db, current, row.request, row.now) : current;
}

/** A blocker of a later attempt replaces the receipt of an earlier one: the new questions need their own comment. */
function supersedes(request: DeliveryRequest, current: TrackerDeliveryRow): boolean {
  const stored = JSON.parse(current.request) as DeliveryRequest;
  return (request.attempt ?? 0) > (stored.attempt ?? 0);
}

/** Starts the receipt over for the newer request; a compare-and-swap on the stored request, so two at once replace it once. */
async function supersede(db: D1Database, current: TrackerDeliveryRow, request: DeliveryRequest, now: number): Promise<TrackerDeliveryRow> {
  await drizzle(db)
    .update(trackerDeliveries)
    .set({ request: JSON.stringify(request), status: "pending", tries: 0, lastError: null, receipt: null, createdAtMs: now, lastTryAtMs: null, deliveredAtMs: null })
    .where(and(key(current.runId, current.kind), eq(trackerDeliveries.request, current.request)));
  return (await readTrackerDelivery(db, current.runId, current.kind)) ?? current;
}

/** The receipts of tracker deliveries: a round counts its tries in `tries`. */
const RECEIPTS: ReceiptTable<typeof trackerDeliveries> = {
  table: trackerDeliveries,
  count: trackerDeliveries.tries,
  lastAttemptAtMs: trackerDeliveries.lastTryAtMs,
  counted: (now) => ({ tries: sql`${trackerDeliveries.tries} + 1`, lastTryAtMs: now }),
};

/** Claims try `expected + 1` (claimNext); null when another delivery took it. */
export function claimTry(db: D1Database, runId: string, kind: DeliveryKind, expected: number, now: number): Promise<number | null> {
  return claimNext(db, RECEIPTS, key(runId, kind), expected, now);
}

/** Records how try `tries` went, unless an operator's retry started over meanwhile. */
export async function recordTry(
  db: D1Database,
  runId: string,
  kind: DeliveryKind,
  tries: number,
  result: { status: DeliveryStatus; error: string | null; receipt: CommentReceipt | null; now: number },
): Promise<void> {
  const receipt = result.receipt ? JSON.stringify({ comment_id: result.receipt.id, url: result.receipt.url }) : null;
  await recordEnd(db, RECEIPTS, key(runId, kind), tries, result, { receipt });
}

/** Gives up on a delivery whose tries are spent (giveUp). */
export async function markFailed(db: D1Database, runId: string, kind: DeliveryKind, expected: number, error: string): Promise<void> {
  await giveUp(db, RECEIPTS, key(runId, kind), expected, error);
}

/** An operator's retry of a failed delivery: pending again with its tries counted from 0. False when it was not failed. */
export async function restartFailed(db: D1Database, runId: string, kind: DeliveryKind): Promise<boolean> {
  const rows = await drizzle(db)
    .update(trackerDeliveries)
    .set({ status: "pending", tries: 0 })
    .where(and(key(runId, kind), eq(trackerDeliveries.status, "failed")))
    .returning({ tries: trackerDeliveries.tries });
  return rows.length === 1;
}

/**
 * Pending deliveries whose next try is overdue by more than DELIVERY_STALE_MS (their queue message
 * was lost), the longest overdue first, at most DELIVERY_SWEEP_MAX.
 */
export function overdueTrackerDeliveries(db: D1Database, config: Config, now: number): Promise<TrackerDeliveryRow[]> {
  return overdueReceipts(db, RECEIPTS, trackerRound(config), { staleMs: config.deliveryStaleMs, max: config.deliverySweepMax }, now);
}

/** A tracker delivery's round: TRACKER_DELIVERY_MAX_ATTEMPTS tries, TRACKER_DELIVERY_BACKOFF_* between them. */
export function trackerRound(config: Config): DeliveryRound {
  return { maxAttempts: config.trackerDeliveryMaxAttempts, backoff: { baseMs: config.trackerDeliveryBackoffBaseMs, maxMs: config.trackerDeliveryBackoffMaxMs } };
}

/** A delivery as GET /v1/runs/:id/deliveries shows it. */
export function trackerDeliveryView(row: TrackerDeliveryRow, config: Config) {
  return {
    kind: row.kind,
    ticket_key: row.ticketKey,
    project_id: row.projectId,
    status: row.status,
    tries: row.tries,
    max_tries: config.trackerDeliveryMaxAttempts,
    last_error: row.lastError,
    receipt: row.receipt ? (JSON.parse(row.receipt) as { comment_id: string; url: string }) : null,
    created_at_ms: row.createdAtMs,
    last_try_at_ms: row.lastTryAtMs,
    delivered_at_ms: row.deliveredAtMs,
  };
}
