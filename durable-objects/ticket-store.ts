// A ticket's own SQLite (durable-objects/ticket-schema.ts): its one row, the webhook deliveries it
// has seen and its bounded history, each write one transaction. Everything a ticket decides
// survives an eviction here; the object keeps nothing else but the queue of calls under way.

import type { Config } from "../src/config";
import type { Env } from "../src/env";
import type { Observation, TicketHistoryEntry, TicketStatus } from "../src/autopilot/ticket-types";

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
  private readonly sql: SqlStorage;

  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly config: Config,
  ) {
    this.sql = storage.sql;
  }

  load(): TicketRow | null {
    return this.sql.exec<TicketRow>("SELECT * FROM ticket WHERE id = 1").toArray()[0] ?? null;
  }

  /** The ticket's history, newest first. */
  history(): TicketHistoryEntry[] {
    return this.sql
      .exec<{ entry: string }>("SELECT entry FROM history ORDER BY seq DESC")
      .toArray()
      .map((r) => JSON.parse(r.entry) as TicketHistoryEntry);
  }

  seen(deliveryId: string, now: number): boolean {
    const row = this.sql.exec<{ seen_at_ms: number }>("SELECT seen_at_ms FROM deliveries WHERE delivery_id = ?", deliveryId).toArray()[0];
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
    return this.sql.exec("SELECT 1 FROM carried_over").toArray().length > 0;
  }

  /** The row taken over, if any, and the record that the take-over is done, in one transaction. */
  carryOver(row: TicketRow | null, now: number): void {
    this.storage.transactionSync(() => {
      if (row) this.store(row);
      this.sql.exec("INSERT INTO carried_over (id, at_ms, run_id) VALUES (1, ?, ?)", now, row?.run_id ?? null);
    });
  }

  private store(row: TicketRow): void {
    this.sql.exec(
      `INSERT INTO ticket (id, ticket_key, project_id, org_id, number, status, reasons, generation, admitted_generation, pending_generation, run_id, updated_at_ms,
         withdraw_run_id, withdraw_reason, withdraw_attempts)
       VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET project_id = excluded.project_id, org_id = excluded.org_id, status = excluded.status, reasons = excluded.reasons,
         generation = excluded.generation, admitted_generation = excluded.admitted_generation, pending_generation = excluded.pending_generation,
         run_id = excluded.run_id, updated_at_ms = excluded.updated_at_ms, withdraw_run_id = excluded.withdraw_run_id,
         withdraw_reason = excluded.withdraw_reason, withdraw_attempts = excluded.withdraw_attempts`,
      row.ticket_key,
      row.project_id,
      row.org_id,
      row.number,
      row.status,
      row.reasons,
      row.generation,
      row.admitted_generation,
      row.pending_generation,
      row.run_id,
      row.updated_at_ms,
      row.withdraw_run_id,
      row.withdraw_reason,
      row.withdraw_attempts,
    );
  }

  /** Delivery ids expire after AUTOPILOT_DELIVERY_TTL_MS and are capped at AUTOPILOT_DELIVERIES_MAX (oldest dropped). */
  private rememberDelivery(deliveryId: string, now: number): void {
    this.sql.exec("INSERT INTO deliveries (delivery_id, seen_at_ms) VALUES (?, ?) ON CONFLICT (delivery_id) DO UPDATE SET seen_at_ms = excluded.seen_at_ms", deliveryId, now);
    this.sql.exec("DELETE FROM deliveries WHERE seen_at_ms < ?", now - this.config.autopilotDeliveryTtlMs);
    this.sql.exec(
      "DELETE FROM deliveries WHERE delivery_id NOT IN (SELECT delivery_id FROM deliveries ORDER BY seen_at_ms DESC, delivery_id LIMIT ?)",
      this.config.autopilotDeliveriesMax,
    );
  }

  /** History is bounded by AUTOPILOT_HISTORY_MAX entries (oldest dropped). */
  private remember(entry: TicketHistoryEntry): void {
    this.sql.exec("INSERT INTO history (entry) VALUES (?)", JSON.stringify(entry));
    this.sql.exec("DELETE FROM history WHERE seq NOT IN (SELECT seq FROM history ORDER BY seq DESC LIMIT ?)", this.config.autopilotHistoryMax);
  }
}
