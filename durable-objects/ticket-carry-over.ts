// Tickets kept before they were per project: a TicketObject was named by the key alone
// (`github:Owner/Repo#12`, the repository as the project spells it) and shared by every project
// watching that repository. A ticket now named per project (TicketObject.carryOver) takes over what
// that object kept for its own project, once; these are the two reads it needs.

import type { Env } from "../src/env";
import { newId } from "../src/lib/crypto";
import type { TicketAddress, TicketRow } from "./ticket-object";

/**
 * The row the old object kept for this project, or null. Asked only when the project's index (D1)
 * has the key: every ticket the old objects kept state for was indexed, and a new issue's ticket
 * then costs no request to a second object.
 */
export async function legacyTicketRow(env: Env, at: TicketAddress): Promise<TicketRow | null> {
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
export async function withPendingRunId(env: Env, row: TicketRow): Promise<TicketRow> {
  if (row.pending_generation === null || row.run_id !== null) return row;
  const key = await env.DB.prepare("SELECT run_id FROM idempotency_keys WHERE org_id = ? AND key = ?")
    .bind(row.org_id, `autopilot:${row.ticket_key}:${row.pending_generation}`)
    .first<{ run_id: string }>();
  return { ...row, run_id: key?.run_id ?? newId("run") };
}
