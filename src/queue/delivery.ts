// One way to retry a delivery from the events queue (a completion callback, a tracker comment or
// label move): its receipt row is pending until delivered or until the attempts of its round run
// out (failed), and every write is conditional on the attempt count it was made against, so
// duplicate queue deliveries of the same message make at most one attempt each
// (../shared/spec/build-lifecycle.md, "Events and completion retry independently").

import { and, eq, sql, type SQL } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { SQLiteColumn, SQLiteTable, SQLiteUpdateSetSource } from "drizzle-orm/sqlite-core";
import { exponentialBackoffMs } from "../lib/backoff";
import { QUEUE_DELAY_MAX_S } from "./messages";

/** What the consumer does with a delivery's message: acknowledge it, or have the Queue retry it. */
export type DeliveryOutcome = { ack: true } | { ack: false; delaySeconds: number };

export type DeliveryStatus = "pending" | "delivered" | "failed";

/** A receipts table: every receipt has a status, a last error, a delivery time and the time it was asked for. */
type Receipts = SQLiteTable & Record<"status" | "lastError" | "deliveredAtMs" | "createdAtMs", SQLiteColumn>;

/** A table of receipts and how it counts the attempts of a round. */
export interface ReceiptTable<T extends Receipts> {
  table: T;
  /** The attempts made in the current round. */
  count: SQLiteColumn;
  /** When the last attempt began (null before the first). */
  lastAttemptAtMs: SQLiteColumn;
  /** The write that counts one more attempt, begun at `now`. */
  counted: (now: number) => SQLiteUpdateSetSource<T>;
}

/** A write to the receipt `key` that happens only while it is pending at attempt `count`. */
function writeAtCount<T extends Receipts>(db: D1Database, r: ReceiptTable<T>, key: SQL | undefined, count: number, set: SQLiteUpdateSetSource<T>) {
  return drizzle(db)
    .update(r.table)
    .set(set)
    .where(and(key, eq(r.table.status, "pending"), eq(r.count, count)));
}

/**
 * Claims attempt `expected + 1`: a compare-and-swap on the attempt count, so of two deliveries of
 * the same message only one makes the attempt. Returns the attempt number, or null when lost.
 */
export async function claimNext<T extends Receipts>(db: D1Database, r: ReceiptTable<T>, key: SQL | undefined, expected: number, now: number): Promise<number | null> {
  const rows = await writeAtCount(db, r, key, expected, r.counted(now)).returning({ count: r.count });
  return rows.length === 1 ? (rows[0].count as number) : null;
}

/**
 * Records how attempt `attempt` went, with the table's own columns of it in `more`, unless a new
 * round (an operator's redelivery or retry) started meanwhile.
 */
export async function recordEnd<T extends Receipts>(
  db: D1Database,
  r: ReceiptTable<T>,
  key: SQL | undefined,
  attempt: number,
  end: { status: DeliveryStatus; error: string | null; now: number },
  more: SQLiteUpdateSetSource<T>,
): Promise<void> {
  // The three columns every receipt table has (the ReceiptTable constraint); drizzle cannot map a
  // generic table's keys, hence the cast.
  const shared = { status: end.status, lastError: end.error, deliveredAtMs: end.status === "delivered" ? end.now : null } as SQLiteUpdateSetSource<T>;
  await writeAtCount(db, r, key, attempt, { ...shared, ...more });
}

/** Gives up on a round whose attempts are spent (for example after a crash between claim and record). */
export async function giveUp<T extends Receipts>(db: D1Database, r: ReceiptTable<T>, key: SQL | undefined, expected: number, error: string): Promise<void> {
  await writeAtCount(db, r, key, expected, { status: "failed", lastError: error } as SQLiteUpdateSetSource<T>);
}

/** Backoff before the next attempt: base * 2^(attempt-1), capped (attempts count from 1). */
export function retryBackoffMs(backoff: { baseMs: number; maxMs: number }, attempt: number): number {
  return exponentialBackoffMs({ ...backoff, maxDoublings: 30 }, attempt - 1);
}

/** A kind of delivery's round: its attempts, and the backoff between them (doubling, capped). */
export interface DeliveryRound {
  maxAttempts: number;
  backoff: { baseMs: number; maxMs: number };
}

/** How an attempt went: delivered or not, and whether no later attempt can do better (`final`). */
export interface AttemptEnd {
  ok: boolean;
  final?: boolean;
}

/** What follows an attempt: the receipt's status, the queue's delay before the next attempt (null when none), and the consumer's answer. */
export interface AfterAttempt {
  status: DeliveryStatus;
  retryInS: number | null;
  outcome: DeliveryOutcome;
}

/**
 * What follows attempt `attempt` of a round, for every kind of delivery: done when delivered; given
 * up when the error is final or the round's attempts are spent; otherwise retried by the queue after
 * the backoff, within the queue's longest delay.
 */
export function afterAttempt(end: AttemptEnd, attempt: number, round: DeliveryRound): AfterAttempt {
  const status = end.ok ? "delivered" : end.final || attempt >= round.maxAttempts ? "failed" : "pending";
  if (status !== "pending") return { status, retryInS: null, outcome: { ack: true } };
  const delaySeconds = Math.min(QUEUE_DELAY_MAX_S, Math.ceil(retryBackoffMs(round.backoff, attempt) / 1_000));
  return { status, retryInS: delaySeconds, outcome: { ack: false, delaySeconds } };
}

/**
 * Whether a queue delivery of a round's message comes after its attempt was already made: each
 * delivery of a message is one attempt, counted from the attempts the round had when the message was
 * sent (`fromAttempt`: 0 for a round's first message, more for one the sweep sent again).
 */
export function isDuplicateDelivery(attempts: number, fromAttempt: number | undefined, queueAttempts: number): boolean {
  return attempts >= (fromAttempt ?? 0) + queueAttempts;
}

/**
 * The receipts whose queue message was lost, the longest overdue first, at most `sweep.max`:
 * pending, and their next attempt was due more than `sweep.staleMs` before `now`. The next attempt
 * is due when the round was asked for (no attempt made yet), or the round's backoff after the last
 * attempt began (as afterAttempt scheduled it), so a delivery being made or waiting out its backoff
 * is never overdue.
 */
export async function overdueReceipts<T extends Receipts>(db: D1Database, r: ReceiptTable<T>, round: DeliveryRound, sweep: { staleMs: number; max: number }, now: number): Promise<T["$inferSelect"][]> {
  const backoffMs = sql`MIN(${round.backoff.baseMs} * (1 << MIN(${r.count} - 1, 30)), ${round.backoff.maxMs})`;
  const since = sql`COALESCE(${r.lastAttemptAtMs}, ${r.table.createdAtMs})`;
  const dueAtMs = sql`CASE WHEN ${r.count} = 0 THEN ${r.table.createdAtMs} ELSE ${since} + ${backoffMs} END`;
  const rows = await drizzle(db)
    .select()
    .from(r.table as SQLiteTable)
    .where(and(eq(r.table.status, "pending"), sql`${dueAtMs} < ${now - sweep.staleMs}`))
    .orderBy(since)
    .limit(sweep.max)
    .all();
  return rows as T["$inferSelect"][];
}
