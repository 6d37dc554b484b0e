// An autopilot run's end reaches its ticket through the outbox (an EVENT_EFFECTS entry,
// src/queue/effects.ts), so GET …/tickets shows the ticket `done` as soon as its run ended instead of
// at the next observation. Idempotent: the ticket records only its own unfinished run, once.

import { eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { runs } from "../db/schema";
import type { Env, OutboxMessage } from "../env";
import { isRefusal } from "../errors";
import { runStub } from "../lib/stubs";
import { terminalStateOf } from "../run/states";
import { ticketStub } from "./admission";

export async function tellTicketRunEnded(env: Env, event: OutboxMessage): Promise<void> {
  if (!terminalStateOf(event)) return;
  // Only runs an autopilot project admitted have a ticket (their queue row names the project).
  const row = await drizzle(env.DB).select({ projectId: runs.projectId }).from(runs).where(eq(runs.id, event.run_id)).get();
  if (!row?.projectId) return;
  const run = await runStub(env, event.run_id).read(event.org_id);
  if (isRefusal(run)) return;
  const key = run.metadata?.autopilot_ticket;
  if (typeof key === "string") await ticketStub(env, { projectId: row.projectId, ticketKey: key }).runEnded(event.run_id);
}
