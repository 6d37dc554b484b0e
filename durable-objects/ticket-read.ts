// The ticket as GET …/tickets/{key} shows it (docs/protocol.md, "Autopilot admission"): its
// standing status and reasons, its generations and run, a withdrawal under way, and its history.

import type { TicketState } from "../src/autopilot/ticket-types";
import type { TicketStore } from "./ticket-store";

export function readTicket(store: TicketStore): TicketState | null {
  const row = store.load();
  if (!row) return null;
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
  };
}
