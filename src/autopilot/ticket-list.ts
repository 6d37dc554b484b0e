// A project's ticket index as GET /v1/autopilot/projects/:id/tickets lists it (docs/protocol.md,
// "Autopilot admission"): the D1 projection of its TicketObjects (src/db/autopilot-schema.ts), most
// recently changed first, one keyset page at a time (src/lib/pagination.ts).

import { eq, type SQL } from "drizzle-orm";
import { autopilotTickets } from "../db/autopilot-schema";
import { listPage } from "../lib/pagination";

export type TicketIndexRow = typeof autopilotTickets.$inferSelect;

/** One page of the project's tickets, optionally of one status, after `cursor`; and the next page's cursor. */
export function listProjectTickets(
  db: D1Database,
  projectId: string,
  query: { status?: string; cursor?: string; limit: number },
): Promise<{ kept: TicketIndexRow[]; next: string | null }> {
  const conditions: SQL[] = [eq(autopilotTickets.projectId, projectId)];
  if (query.status) conditions.push(eq(autopilotTickets.status, query.status));
  return listPage(db, autopilotTickets, conditions, query.cursor, query.limit, { at: "updatedAtMs", id: "ticketKey" });
}
