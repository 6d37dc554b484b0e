// Tickets kept before they were per project: a TicketObject was named by the key alone
// (`github:Owner/Repo#12`, the repository as the project spells it) and shared by every project
// watching that repository. A ticket now named per project takes over what that object kept for
// its own project, once (carryOver); the old object answers through TicketObject.legacyRow.

import type { Env } from "../src/env";
import { newId } from "../src/lib/crypto";
import { log } from "../src/lib/log";
import type { TicketAddress } from "../src/autopilot/ticket-types";
import type { TicketRow, TicketStore } from "./ticket-store";

/**
 * The first time this object is used it takes over the row the old object kept for its project
 * (generations, the unfinished or pending run, a withdrawal under way), so a run admitted before
 * the change is still the ticket's run: backed at its claim, never admitted twice. The old object,
 * with its history (which may mix two organizations' entries) and any other project's row, is left
 * behind. Done once (the `carried_over` row); the old object is asked only when the project's index lists it.
 */
export async function carryOver(env: Env, store: TicketStore, at: TicketAddress): Promise<void> {
  if (store.load() || store.carriedOver()) return;
  const old = await legacyTicketRow(env, at);
  const row = old ? await withPendingRunId(env, old) : null;
  store.carryOver(row, Date.now());
  if (row) log("autopilot.ticket_carried_over", { ticket: row.ticket_key, project: row.project_id, run_id: row.run_id, reason: "kept per repository before tickets were per project" });
}

/**
 * The row the old object kept for this project, or null. Asked only when the project's index (D1)
 * has the key: every ticket the old objects kept state for was indexed, and a new issue's ticket
 * then costs no request to a second object.
 */
async function legacyTicketRow(env: Env, at: TicketAddress): Promise<TicketRow | null> {
  const indexed = await env.DB.prepare("SELECT 1 AS one FROM autopilot_tickets WHERE project_id = ? AND ticket_key = ?")
    .bind(at.projectId, at.ticketKey)
    .first();
  if (!indexed) return null;
  return env.TICKET.get(env.TICKET.idFromName(at.ticketKey)).legacyRow(at.projectId);
}

/**
 * An old pending admission named no run id: its run was created under the idempotency key
 * `autopilot:<key>:<generation>`. The key's run (if the crash came after it) becomes the pending
 * run id, or a new id when the run was never created, so the admission is finished by id from here on.
 */
async function withPendingRunId(env: Env, row: TicketRow): Promise<TicketRow> {
  if (row.pending_generation === null || row.run_id !== null) return row;
  const key = await env.DB.prepare("SELECT run_id FROM idempotency_keys WHERE org_id = ? AND key = ?")
    .bind(row.org_id, `autopilot:${row.ticket_key}:${row.pending_generation}`)
    .first<{ run_id: string }>();
  return { ...row, run_id: key?.run_id ?? newId("run") };
}
