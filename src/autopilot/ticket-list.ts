// A project's ticket index as GET /v1/autopilot/projects/:id/tickets lists it (docs/protocol.md,
// "Autopilot admission"): the D1 projection of its TicketObjects (src/db/autopilot-schema.ts), most
// recently changed first, one keyset page at a time (src/lib/pagination.ts).

import { eq, inArray, type SQL } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { autopilotTickets } from "../db/autopilot-schema";
import { runs } from "../db/schema";
import { readInBatches } from "../lib/d1-batches";
import { listPage } from "../lib/pagination";
import type { ListedAutopilotTicket } from "../protocol/autopilot";
import { issuePage } from "./deps";

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

/** The states of the listed tickets' runs (the run index, D1), by run id: a blocked one waits for a person. */
export async function runStates(db: D1Database, rows: TicketIndexRow[]): Promise<Map<string, string>> {
  const ids = rows.flatMap((r) => (r.runId ? [r.runId] : []));
  const found = await readInBatches(ids, (batch) => drizzle(db).select({ id: runs.id, state: runs.state }).from(runs).where(inArray(runs.id, batch)).all());
  return new Map(found.map((run) => [run.id, run.state]));
}

/** A ticket's index row as the list shows it, with its run's state from `states`. */
export function listedTicket(r: TicketIndexRow, states: Map<string, string>, project: Parameters<typeof issuePage>[0]): ListedAutopilotTicket {
  return {
    ticket: r.ticketKey,
    number: r.number,
    issue_url: issuePage(project, r.number),
    status: r.status as ListedAutopilotTicket["status"],
    reasons: JSON.parse(r.reasons) as string[],
    generation: r.generation,
    run_id: r.runId,
    run_state: r.runId ? ((states.get(r.runId) ?? null) as ListedAutopilotTicket["run_state"]) : null,
    decision: r.decision === null ? null : (JSON.parse(r.decision) as ListedAutopilotTicket["decision"]),
    last_error: r.lastError === null ? null : (JSON.parse(r.lastError) as ListedAutopilotTicket["last_error"]),
    updated_at_ms: r.updatedAtMs,
  };
}
