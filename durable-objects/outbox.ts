// The run's event outbox: events are written with the next per-run sequence number in the same
// transaction as the change they describe, then published to the Queue (a claim's, which have no
// side effects, are stored in D1 with the claim's queue row instead); unsent events are retried
// from the alarm with bounded attempts and backoff (../shared/spec/build-lifecycle.md, "Events and
// completion retry independently").

import { and, count, desc, eq, gt, inArray, isNotNull, isNull, lt, lte, max, min, sql } from "drizzle-orm";
import type { Config } from "../src/config";
import type { Env, OutboxMessage } from "../src/env";
import { exponentialBackoffMs } from "../src/lib/backoff";
import { logRun } from "../src/lib/log";
import { hasEffects } from "../src/queue/effects";
import { eventAttempt } from "../src/queue/messages";
import { insertEvent } from "../src/queue/store";
import type { RunEventDraft, RunRecord } from "../src/run/types";
import { outboxEvents as outbox } from "./run-schema";
import type { StoreDb } from "./store";

export interface StoredEvent {
  seq: number;
  type: string;
  at_ms: number;
  /** The event's JSON text: plain strings cross Durable Object RPC without type gymnastics. */
  data: string;
}

/** Delay after the `attempts`-th failed publish: OUTBOX_BACKOFF_MS * 2^attempts, the exponent at most 16 (no cap on the delay). */
export function publishRetryMs(config: Pick<Config, "outboxBackoffMs">, attempts: number): number {
  return exponentialBackoffMs({ baseMs: config.outboxBackoffMs, maxDoublings: 16 }, attempts);
}

interface OutboxRow {
  seq: number;
  type: string;
  at_ms: number;
  data: string;
  attempts: number;
}

/** The columns an event is read with. */
const ROW = { seq: outbox.seq, type: outbox.type, at_ms: outbox.at_ms, data: outbox.data, attempts: outbox.attempts };

const storedEvent = (r: OutboxRow): StoredEvent => ({ seq: r.seq, type: r.type, at_ms: r.at_ms, data: r.data });

/** Queue.sendBatch takes at most 100 messages. */
const PUBLISH_BATCH = 100;

/** Due events on their way to the Queue: their rows, their messages, and when the try started. */
export interface Sending {
  rows: OutboxRow[];
  messages: OutboxMessage[];
  atMs: number;
}

export class Outbox {
  /** Events this instance marked unconfirmed (markSending) and has since sent; confirm() clears their marks. */
  private readonly confirmed = new Set<number>();

  /** Its table: outbox (durable-objects/run-schema.ts). */
  constructor(
    private readonly db: StoreDb,
    private readonly env: Env,
    private readonly config: Config,
  ) {}

  // ---- live streams hook -------------------------------------------------------------------------
  private appended: (() => void) | null = null;

  /** Called after every append, inside its transaction; the listener defers its reads (RunStreams.wake). */
  onAppend(listener: () => void): void {
    this.appended = listener;
  }

  /**
   * Appends events; call inside the transaction that makes the change they describe. Every event's
   * data names its run and the attempt it happened in. Answers the sequence numbers given, in order.
   */
  append(run: RunRecord, events: RunEventDraft[], now: number): number[] {
    // The next sequence number follows the last one stored, pruned or not (pruning keeps the last event).
    const nextSeq = sql<number>`(SELECT COALESCE(MAX(${outbox.seq}), 0) + 1 FROM ${outbox})`;
    const seqs = events.map(
      (event) =>
        this.db
          .insert(outbox)
          .values({ seq: nextSeq, type: event.type, data: JSON.stringify({ attempt: run.attempt, ...event.data, run_id: run.id }), at_ms: now, next_attempt_at_ms: now })
          .returning({ seq: outbox.seq })
          .get().seq,
    );
    if (events.length > 0) this.appended?.();
    return seqs;
  }

  after(afterSeq: number, limit: number): StoredEvent[] {
    return this.db.select(ROW).from(outbox).where(gt(outbox.seq, afterSeq)).orderBy(outbox.seq).limit(limit).all().map(storedEvent);
  }

  /** The `limit` events just before `beforeSeq` (null: the newest), newest first. */
  before(beforeSeq: number | null, limit: number): StoredEvent[] {
    const where = beforeSeq === null ? undefined : lt(outbox.seq, beforeSeq);
    return this.db.select(ROW).from(outbox).where(where).orderBy(desc(outbox.seq)).limit(limit).all().map(storedEvent);
  }

  /** Publishes due unsent events in sequence order; a failure backs off and waits for the alarm. */
  async publish(run: RunRecord): Promise<void> {
    const sending = this.due(run, Date.now());
    if (!sending || !(await this.send(run, sending, { marked: false }))) return;
    this.recordSent(sending, { unconfirmed: false });
    this.confirm();
  }

  /**
   * A claim's publish, in two halves, so that its events cost no commit of their own. markSending()
   * runs inside the claim's transaction: it records the due events as sent and *unconfirmed*, so the
   * claim's one commit holds them. sendMarked() then sends them (or storedMarked() records them
   * stored by the claim's own D1 write, see split()); when that fails they are made
   * unsent again (and retried from the alarm); when it succeeds, the next transaction of this
   * instance clears their marks (confirm()). An instance that starts over storage with marks left
   * (a crash, an eviction or a deploy before the next transaction) sends those events again
   * (reclaimUnconfirmed): consumers store each (run, seq) once (src/queue/consumer.ts).
   */
  markSending(run: RunRecord, now: number): Sending | null {
    const sending = this.due(run, now);
    if (sending) this.recordSent(sending, { unconfirmed: true });
    return sending;
  }

  /** Sends what markSending() marked; see there. */
  async sendMarked(run: RunRecord, sending: Sending): Promise<void> {
    if (await this.send(run, sending, { marked: true })) for (const r of sending.rows) this.confirmed.add(r.seq);
  }

  /**
   * Splits what markSending() marked: the events the consumer has side effects for go to the Queue
   * (sendMarked), the others the caller stores in D1 itself, with its own write (inserts, then
   * storedMarked). A claim's events are of the second kind: its event rides on the D1 batch of its
   * queue row instead of costing a Queue message and a consumer's write. Either part is null when empty.
   */
  split(sending: Sending): { send: Sending | null; store: Sending | null } {
    const send: number[] = [];
    const store: number[] = [];
    sending.messages.forEach((m, i) => (hasEffects(m) ? send : store).push(i));
    const part = (at: number[]): Sending | null =>
      at.length === 0 ? null : { rows: at.map((i) => sending.rows[i]), messages: at.map((i) => sending.messages[i]), atMs: sending.atMs };
    return { send: part(send), store: part(store) };
  }

  /** The D1 statements that store `sending`'s events, the consumer's own (src/queue/store.ts). */
  inserts(sending: Sending): D1PreparedStatement[] {
    return sending.messages.map((m) => insertEvent(this.env.DB, m));
  }

  /**
   * After the D1 write that carried inserts(`sending`): stored, or, when it failed, unsent again
   * and retried from the alarm through the Queue, as a failed send is.
   */
  storedMarked(run: RunRecord, sending: Sending, write: { ok: boolean; error: unknown }): void {
    if (!write.ok) return this.recordFailure(run, sending, write.error, { marked: true });
    for (const r of sending.rows) this.confirmed.add(r.seq);
    for (const group of byAttempt(sending.messages)) {
      logRun("outbox.stored", { run: run.id, attempt: group.attempt, seq: group.seq, last_seq: group.lastSeq, count: group.count, reason: "stored in D1 with the run's queue row: no side effects to queue" });
    }
  }

  /** Clears the marks of the events this instance sent; call inside a transaction (a write of its own otherwise). */
  confirm(): void {
    if (this.confirmed.size === 0) return;
    const seqs = [...this.confirmed];
    this.confirmed.clear();
    this.db.update(outbox).set({ unconfirmed: 0 }).where(and(eq(outbox.unconfirmed, 1), inArray(outbox.seq, seqs))).run();
  }

  /**
   * Events an earlier instance marked sent and never confirmed count as unsent again, due now (see
   * markSending). Answers how many; the caller arms the alarm that publishes them. Reads first, so
   * an instance with nothing to reclaim writes nothing.
   */
  reclaimUnconfirmed(now: number): number {
    const left = this.db.select({ n: count() }).from(outbox).where(eq(outbox.unconfirmed, 1)).get()?.n ?? 0;
    if (left === 0) return 0;
    this.db.update(outbox).set({ sent_at_ms: null, unconfirmed: 0, next_attempt_at_ms: now }).where(eq(outbox.unconfirmed, 1)).run();
    return left;
  }

  /** The due unsent events, oldest first, as rows and as the messages that carry them; null when none are due. */
  private due(run: RunRecord, now: number): Sending | null {
    const rows = this.db
      .select(ROW)
      .from(outbox)
      .where(and(isNull(outbox.sent_at_ms), lt(outbox.attempts, this.config.outboxMaxAttempts), lte(outbox.next_attempt_at_ms, now)))
      .orderBy(outbox.seq)
      .limit(PUBLISH_BATCH)
      .all();
    if (rows.length === 0) return null;
    const messages: OutboxMessage[] = rows.map((r) => {
      const data = JSON.parse(r.data) as Record<string, unknown>;
      return { run_id: run.id, org_id: run.orgId, seq: r.seq, type: r.type, at_ms: r.at_ms, attempt: eventAttempt(data), data };
    });
    return { rows, messages, atMs: now };
  }

  /**
   * One Queue send of `sending`: logged and answered true when it went out; backed off until the
   * alarm tries again (recordFailure) and answered false when it did not.
   */
  private async send(run: RunRecord, sending: Sending, opts: { marked: boolean }): Promise<boolean> {
    try {
      await this.env.EVENTS.sendBatch(sending.messages.map((body) => ({ body, contentType: "json" as const })));
    } catch (err) {
      this.recordFailure(run, sending, err, opts);
      return false;
    }
    logPublished(run, sending);
    return true;
  }

  /** Records a try of `sending` as sent, at its start; `unconfirmed` until this instance sees it go out (markSending). */
  private recordSent(sending: Sending, opts: { unconfirmed: boolean }): void {
    this.db
      .update(outbox)
      .set({ sent_at_ms: sending.atMs, attempts: sql`${outbox.attempts} + 1`, last_error: null, unconfirmed: opts.unconfirmed ? 1 : 0 })
      .where(inArray(outbox.seq, sending.rows.map((r) => r.seq)))
      .run();
  }

  /** A failed send backs the events off until the alarm tries again; `marked`: its try was counted when they were marked. */
  private recordFailure(run: RunRecord, sending: Sending, err: unknown, opts: { marked: boolean }): void {
    const attempts = sending.rows[0].attempts + 1;
    const retryAt = Date.now() + publishRetryMs(this.config, attempts);
    this.db
      .update(outbox)
      .set({ sent_at_ms: null, unconfirmed: 0, attempts: sql`${outbox.attempts} + ${opts.marked ? 0 : 1}`, next_attempt_at_ms: retryAt, last_error: String(err) })
      .where(inArray(outbox.seq, sending.rows.map((r) => r.seq)))
      .run();
    for (const group of byAttempt(sending.messages)) {
      logRun("outbox.publish_failed", {
        run: run.id,
        attempt: group.attempt,
        seq: group.seq,
        last_seq: group.lastSeq,
        count: group.count,
        try: attempts,
        reason: String(err),
        retry_at_ms: retryAt,
      });
    }
  }

  /** When the next publish attempt is due, or null when nothing waits. */
  nextAttemptAtMs(): number | null {
    const row = this.db
      .select({ at: min(outbox.next_attempt_at_ms) })
      .from(outbox)
      .where(and(isNull(outbox.sent_at_ms), lt(outbox.attempts, this.config.outboxMaxAttempts)))
      .get();
    return row?.at ?? null;
  }

  /** Status for operators: unsent events and those that exhausted their attempts. */
  status(): { unsent: number; exhausted: number; last_error: string | null } {
    const row = this.db
      .select({
        unsent: count(),
        exhausted: sql<number | null>`SUM(CASE WHEN ${outbox.attempts} >= ${this.config.outboxMaxAttempts} THEN 1 ELSE 0 END)`,
        last_error: max(outbox.last_error),
      })
      .from(outbox)
      .where(isNull(outbox.sent_at_ms))
      .get();
    return { unsent: row?.unsent ?? 0, exhausted: row?.exhausted ?? 0, last_error: row?.last_error ?? null };
  }

  // ---- retention: sent events of a run that ended more than EVENT_RETENTION_MS ago ------------------

  /**
   * Sequence numbers at or below this were pruned (0 when none were). Pruning removes a prefix, so
   * the rows left always run without a gap from here to the last event.
   */
  prunedThroughSeq(): number {
    const lo = this.db.select({ lo: min(outbox.seq) }).from(outbox).get()?.lo ?? null;
    return lo === null ? 0 : lo - 1;
  }

  /**
   * When this run's sent events are due for pruning: EVENT_RETENTION_MS after it ended, while any
   * is left to prune; else null. The alarm calls prune() at that time (durable-objects/run/alarm.ts).
   */
  pruneDueAtMs(run: RunRecord): number | null {
    if (run.endedAtMs === null) return null;
    return this.prunableCount(1) > 0 ? run.endedAtMs + this.config.eventRetentionMs : null;
  }

  /**
   * Deletes up to PRUNE_BATCH_MAX sent events from the front of the outbox once they are due. The
   * last event (the run's end) and everything from the first unsent event on are kept, so sequence
   * numbers never restart and an operator can still redeliver what never went out.
   */
  prune(run: RunRecord, now: number): number {
    const dueAt = this.pruneDueAtMs(run);
    if (dueAt === null || dueAt > now) return 0;
    const deleted = this.db.delete(outbox).where(inArray(outbox.seq, this.prunable(this.config.pruneBatchMax))).returning({ seq: outbox.seq }).all().length;
    logRun("outbox.pruned", { run: run.id, attempt: run.attempt, count: deleted, seq: this.prunedThroughSeq(), reason: "retention" });
    return deleted;
  }

  private prunableCount(limit: number): number {
    return this.prunable(limit).all().length;
  }

  /** The sent events before the last event and before the first unsent one, oldest first, at most `limit`. */
  private prunable(limit: number) {
    const lastSeq = this.db.select({ seq: max(outbox.seq) }).from(outbox);
    const firstUnsent = this.db.select({ seq: min(outbox.seq) }).from(outbox).where(isNull(outbox.sent_at_ms));
    return this.db
      .select({ seq: outbox.seq })
      .from(outbox)
      .where(and(isNotNull(outbox.sent_at_ms), lt(outbox.seq, sql`${lastSeq}`), lt(outbox.seq, sql`COALESCE(${firstUnsent}, ${lastSeq})`)))
      .orderBy(outbox.seq)
      .limit(limit);
  }

  /** Operator redelivery: publish events after `afterSeq` again, sent or not (consumers dedupe). */
  requeue(afterSeq: number, now: number): number {
    this.confirm();
    return this.db
      .update(outbox)
      .set({ sent_at_ms: null, attempts: 0, unconfirmed: 0, next_attempt_at_ms: now })
      .where(gt(outbox.seq, afterSeq))
      .returning({ seq: outbox.seq })
      .all().length;
  }
}

/** One line per publish try and run attempt, for `wrangler tail`. */
function logPublished(run: RunRecord, sending: Sending): void {
  const tries = sending.rows[0].attempts;
  for (const group of byAttempt(sending.messages)) {
    logRun("outbox.published", {
      run: run.id,
      attempt: group.attempt,
      seq: group.seq,
      last_seq: group.lastSeq,
      count: group.count,
      try: tries + 1,
      reason: tries > 0 ? "retry" : "new",
    });
  }
}

/** Consecutive messages of one run attempt, for one log line each. */
function byAttempt(messages: OutboxMessage[]): { attempt: number; seq: number; lastSeq: number; count: number }[] {
  const groups: { attempt: number; seq: number; lastSeq: number; count: number }[] = [];
  for (const m of messages) {
    const last = groups[groups.length - 1];
    if (last && last.attempt === m.attempt) {
      last.lastSeq = m.seq;
      last.count += 1;
    } else groups.push({ attempt: m.attempt, seq: m.seq, lastSeq: m.seq, count: 1 });
  }
  return groups;
}
