// The project's ticket index in D1 (autopilot_tickets), as a ticket writes it: its queue place,
// taken in one statement, and its row, which GET …/tickets and reconciliation read.

import type { Env } from "../src/env";
import { log } from "../src/lib/log";
import type { Observation, TicketAddress, TrackerLastError } from "../src/autopilot/ticket-types";
import type { TicketContext, TicketRow } from "./ticket-store";

/** A project's admitted runs still waiting for a runner, and admissions under way: what queueCapacity bounds. */
const WAITING = `SELECT COUNT(*) FROM autopilot_tickets t LEFT JOIN runs r ON r.id = t.run_id
  WHERE t.project_id = ?1 AND t.ticket_key <> ?2 AND (t.status = 'admitting' OR r.state = 'queued')`;
const WAITING_RUNS_SQL = `SELECT (${WAITING}) AS n`;

/**
 * Takes one of the project's queue places for this ticket, in one D1 statement (D1 runs one at a
 * time), so two tickets admitted at once cannot both take the last place. The place is the ticket's
 * index row marked `admitting` until its run is recorded.
 */
const RESERVE_SQL = `INSERT INTO autopilot_tickets (project_id, ticket_key, org_id, number, status, reasons, generation, run_id, updated_at_ms)
  SELECT ?1, ?2, ?3, ?4, 'admitting', '[]', ?5, NULL, ?6 WHERE (${WAITING}) < ?7
  ON CONFLICT (project_id, ticket_key) DO UPDATE SET status = 'admitting', reasons = '[]', generation = excluded.generation,
    run_id = NULL, updated_at_ms = excluded.updated_at_ms`;

/**
 * The ticket's row in the project's index (D1), which GET …/tickets and reconciliation read: with
 * its latest history entry and its last error, so the list shows why without reading each ticket.
 */
const INDEX_SQL = `INSERT INTO autopilot_tickets (project_id, ticket_key, org_id, number, status, reasons, generation, run_id, updated_at_ms, decision, last_error)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
  ON CONFLICT (project_id, ticket_key) DO UPDATE SET status = excluded.status, reasons = excluded.reasons,
    generation = excluded.generation, run_id = excluded.run_id, updated_at_ms = excluded.updated_at_ms,
    decision = excluded.decision, last_error = excluded.last_error
  WHERE excluded.updated_at_ms >= autopilot_tickets.updated_at_ms`;

/** A ticket's last error alone (recorded, or cleared by a read that succeeded); an issue never indexed has no row to change. */
const ERROR_SQL = `UPDATE autopilot_tickets SET last_error = ?3 WHERE project_id = ?1 AND ticket_key = ?2`;

export async function reservePlace(env: Env, obs: Observation, row: TicketRow, generation: string, now: number): Promise<boolean> {
  const result = await env.DB.prepare(RESERVE_SQL)
    .bind(obs.project.id, row.ticket_key, row.org_id, row.number, generation, now, obs.project.queueCapacity)
    .run();
  return result.meta.changes > 0;
}

export async function waitingRuns(env: Env, obs: Observation, row: TicketRow): Promise<number> {
  const waiting = await env.DB.prepare(WAITING_RUNS_SQL).bind(obs.project.id, row.ticket_key).first<{ n: number }>();
  return waiting?.n ?? 0;
}

/** The project's index row follows the ticket (newer wins); a failure is repaired by the next observation. */
export async function indexTicket(t: TicketContext, row: TicketRow): Promise<void> {
  const entry = t.store.newestEntry();
  const decision = entry && { kind: entry.kind, door: entry.door, actor: entry.actor, basis: entry.basis, at_ms: entry.at_ms };
  const lastError = t.store.lastError();
  try {
    await t.env.DB.prepare(INDEX_SQL)
      .bind(row.project_id, row.ticket_key, row.org_id, row.number, row.status, row.reasons, row.generation, row.run_id, row.updated_at_ms, json(decision), json(lastError))
      .run();
  } catch (err) {
    log("autopilot.index_failed", { ticket: row.ticket_key, project: row.project_id, reason: String(err) });
  }
}

/** The ticket's last error in its index row, as the ticket now has it (null: cleared). Best effort, like indexTicket. */
export async function indexLastError(env: Env, at: TicketAddress, error: TrackerLastError | null): Promise<void> {
  try {
    await env.DB.prepare(ERROR_SQL).bind(at.projectId, at.ticketKey, json(error)).run();
  } catch (err) {
    log("autopilot.index_failed", { ticket: at.ticketKey, project: at.projectId, reason: String(err) });
  }
}

const json = (value: object | null) => (value === null ? null : JSON.stringify(value));
