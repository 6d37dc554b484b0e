// A ticket's own SQLite (its tables in durable-objects/ticket-schema.ts): its one row, the webhook
// deliveries it has seen and its bounded history, each write one transaction. Everything a ticket decides
// survives an eviction here; the object keeps nothing else but the queue of calls under way.

import type { Config } from "../src/config";
import type { Env } from "../src/env";
import { desc, eq, lt, notInArray } from "drizzle-orm";
import type { Observation, TicketHistoryEntry, TicketStatus, TrackerLastError } from "../src/autopilot/ticket-types";
import type { StoreDb } from "./store";
import { carriedOver, deliveries, history, lastError, ticket } from "./ticket-schema";

export type TicketRow = {
  ticket_key: string;
  project_id: string;
  org_id: string;
  number: number;
  status: TicketStatus;
  reasons: string;
  generation: string | null;
  admitted_generation: string | null;
  /** An admission begun (its run may exist) and not yet recorded: the next observation finishes it. */
  pending_generation: string | null;
  /** The ticket's run; while an admission is pending, the id its run is (or will be) created under. */
  run_id: string | null;
  updated_at_ms: number;
  /** A lapse recorded and its run not yet withdrawn: the ticket no longer backs this run. */
  withdraw_run_id: string | null;
  withdraw_reason: string | null;
  withdraw_attempts: number;
};

export const NO_WITHDRAWAL = { withdraw_run_id: null, withdraw_reason: null, withdraw_attempts: 0 } as const;

/** What each of the ticket's concerns is handed by the object: its bindings, settings, storage and alarm. */
export interface TicketContext {
  env: Env;
  config: Config;
  store: TicketStore;
  setAlarm(atMs: number): Promise<void>;
}

export class TicketStore {
  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly db: StoreDb,
    private readonly config: Config,
  ) {}

  load(): TicketRow | null {
    return this.db.select().from(ticket).where(eq(ticket.id, 1)).get() ?? null;
  }

  /** The ticket's history, newest first. */
  history(): TicketHistoryEntry[] {
    return this.db
      .select({ entry: history.entry })
      .from(history)
      .orderBy(desc(history.seq))
      .all()
      .map((r) => JSON.parse(r.entry) as TicketHistoryEntry);
  }

  /** The ticket's latest history entry, if any. */
  newestEntry(): TicketHistoryEntry | null {
    const row = this.db.select({ entry: history.entry }).from(history).orderBy(desc(history.seq)).limit(1).get();
    return row ? (JSON.parse(row.entry) as TicketHistoryEntry) : null;
  }

  /** The last time a door could not read (or admit) the issue; null after an observation that read it. */
  lastError(): TrackerLastError | null {
    return this.db.select({ at_ms: lastError.at_ms, door: lastError.door, failure: lastError.failure, message: lastError.message }).from(lastError).get() ?? null;
  }

  /** Replaces the last error: only the newest is kept. */
  recordError(error: TrackerLastError): void {
    this.db.insert(lastError).values({ id: 1, ...error }).onConflictDoUpdate({ target: lastError.id, set: error }).run();
  }

  clearError(): void {
    this.db.delete(lastError).run();
  }

  seen(deliveryId: string, now: number): boolean {
    const row = this.db.select({ seen_at_ms: deliveries.seen_at_ms }).from(deliveries).where(eq(deliveries.delivery_id, deliveryId)).get();
    return row !== undefined && now - row.seen_at_ms < this.config.autopilotDeliveryTtlMs;
  }

  /** The ticket row, the delivery id and a history entry (when there is one), in one transaction. */
  write(obs: Observation, row: TicketRow, now: number, entry: Omit<TicketHistoryEntry, "at_ms" | "door" | "generation"> | null): void {
    this.storage.transactionSync(() => {
      this.store(row);
      if (obs.deliveryId !== null) this.rememberDelivery(obs.deliveryId, now);
      if (entry) this.remember({ ...entry, at_ms: now, door: obs.door, generation: row.generation });
    });
  }

  /** The ticket row alone, or with the history entry that explains it, in one transaction. */
  save(row: TicketRow, entry: TicketHistoryEntry | null = null): void {
    this.storage.transactionSync(() => {
      this.store(row);
      if (entry) this.remember(entry);
    });
  }

  /** Whether this object already took over (or found nothing to take over from) its old object (ticket-carry-over.ts). */
  carriedOver(): boolean {
    return this.db.select({ id: carriedOver.id }).from(carriedOver).all().length > 0;
  }

  /** The row taken over, if any, and the record that the take-over is done, in one transaction. */
  carryOver(row: TicketRow | null, now: number): void {
    this.storage.transactionSync(() => {
      if (row) this.store(row);
      this.db.insert(carriedOver).values({ id: 1, at_ms: now, run_id: row?.run_id ?? null }).run();
    });
  }

  /** The one row, inserted or updated; its key and number never change once written. */
  private store(row: TicketRow): void {
    const set = {
      project_id: row.project_id,
      org_id: row.org_id,
      status: row.status,
      reasons: row.reasons,
      generation: row.generation,
      admitted_generation: row.admitted_generation,
      pending_generation: row.pending_generation,
      run_id: row.run_id,
      updated_at_ms: row.updated_at_ms,
      withdraw_run_id: row.withdraw_run_id,
      withdraw_reason: row.withdraw_reason,
      withdraw_attempts: row.withdraw_attempts,
    };
    this.db
      .insert(ticket)
      .values({ id: 1, ticket_key: row.ticket_key, number: row.number, ...set })
      .onConflictDoUpdate({ target: ticket.id, set })
      .run();
  }

  /** Delivery ids expire after AUTOPILOT_DELIVERY_TTL_MS and are capped at AUTOPILOT_DELIVERIES_MAX (oldest dropped). */
  private rememberDelivery(deliveryId: string, now: number): void {
    this.db
      .insert(deliveries)
      .values({ delivery_id: deliveryId, seen_at_ms: now })
      .onConflictDoUpdate({ target: deliveries.delivery_id, set: { seen_at_ms: now } })
      .run();
    this.db.delete(deliveries).where(lt(deliveries.seen_at_ms, now - this.config.autopilotDeliveryTtlMs)).run();
    const newest = this.db
      .select({ id: deliveries.delivery_id })
      .from(deliveries)
      .orderBy(desc(deliveries.seen_at_ms), deliveries.delivery_id)
      .limit(this.config.autopilotDeliveriesMax);
    this.db.delete(deliveries).where(notInArray(deliveries.delivery_id, newest)).run();
  }

  /** History is bounded by AUTOPILOT_HISTORY_MAX entries (oldest dropped). */
  private remember(entry: TicketHistoryEntry): void {
    this.db.insert(history).values({ entry: JSON.stringify(entry) }).run();
    const newest = this.db.select({ seq: history.seq }).from(history).orderBy(desc(history.seq)).limit(this.config.autopilotHistoryMax);
    this.db.delete(history).where(notInArray(history.seq, newest)).run();
  }
}
