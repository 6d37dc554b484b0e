// The ticket as GET …/tickets/{key} shows it (docs/protocol.md, "Autopilot admission"): its
// standing status and reasons, its generations and run, a withdrawal under way, its history, and
// the last time its issue could not be read. An issue whose very first read failed has no row
// yet: it reads as an idle ticket with that error, so the operator finds why nothing happened.

import type { TicketAddress, TicketState } from "../src/autopilot/ticket-types";
import type { TicketStore } from "./ticket-store";

export function readTicket(store: TicketStore, at: TicketAddress): TicketState | null {
  const row = store.load();
  const lastError = store.lastError();
  if (!row) return lastError ? neverRead(at, lastError) : null;
  return {
    ticket_key: row.ticket_key,
    project_id: row.project_id,
    status: row.status,
    reasons: JSON.parse(row.reasons) as string[],
    generation: row.generation,
    admitted_generation: row.admitted_generation,
    run_id: row.run_id,
    updated_at_ms: row.updated_at_ms,
    withdrawal: row.withdraw_run_id ? { run_id: row.withdraw_run_id, reason: row.withdraw_reason ?? "", attempts: row.withdraw_attempts } : null,
    history: store.history(),
    last_error: lastError,
  };
}

function neverRead(at: TicketAddress, lastError: NonNullable<TicketState["last_error"]>): TicketState {
  const none = { generation: null, admitted_generation: null, run_id: null, withdrawal: null };
  return { ticket_key: at.ticketKey, project_id: at.projectId, status: "idle", reasons: [], ...none, updated_at_ms: lastError.at_ms, history: [], last_error: lastError };
}
