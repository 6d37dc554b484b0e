// Model-spend authorization of autopilot runs against the credit ledger (docs/protocol.md,
// "Autopilot scheduler"): the scheduler reserves a project's per-run amount from the organization's
// credit when it first hands a run out, the way a build job reserves (src/builds/reserve.ts), and
// the run's end settles it once, as a job's end does (src/ledger/settle-held.ts): the cost within
// the hold is spent and the rest released; a cost above the hold, or unknown, stays held for cost
// review, never capped.

import { and, eq, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { runReservations } from "../db/ledger-schema";
import type { Env, OutboxMessage } from "../env";
import { statementOf } from "../lib/cost";
import { newId } from "../lib/crypto";
import { log } from "../lib/log";
import { applyOp, insertHeldEntry, type AmountColumn } from "../ledger/entries";
import { runEndStatements } from "../ledger/settle-held";
import { isTerminal, terminalStateOf } from "../run/states";
import type { RunView } from "../run/view";
import type { HoldEnd } from "../../durable-objects/scheduler-gates";

/** A run reservation's ledger entry, written by the scheduler (see insertHeldEntry). */
function insertRunEntry(db: D1Database, e: { orgId: string; runId: string; opId: string; kind: "reserve" | "release"; column: AmountColumn; note: string; nowMs: number }) {
  return insertHeldEntry(db, { holder: "run", orgId: e.orgId, holderId: e.runId, opId: e.opId, kind: e.kind, amountColumn: e.column, actor: "scheduler", note: e.note, nowMs: e.nowMs });
}

/**
 * `reserved`: held now, by this call. `already_reserved`: the run holds its reservation from an
 * earlier claim. `insufficient_credit`: the organization's available credit is short. `ended`: the
 * run's reservation was settled or waits for cost review: its run has ended and is not handed out.
 */
export type ReserveOutcome = "reserved" | "already_reserved" | "insufficient_credit" | "ended";

/**
 * Reserves `cents` for the run in one batch whose first statement decides: the reservation row is
 * written only when the organization has that much available, and either the run has no row yet or
 * its row was released (a claim the run object refused gave it back): that row is held again,
 * under the same balance check, in the same statement. A row still held is the run's one
 * reservation, never a second (../shared/DESIGN.md, invariant 9).
 */
export async function reserveRunBudget(env: Env, input: { orgId: string; runId: string; projectId: string; cents: number }): Promise<ReserveOutcome> {
  const db = env.DB;
  const opId = newId("op");
  const nowMs = Date.now();
  const results = await db.batch([
    // Raw SQL: the INSERT … SELECT that decides the hold, guarded by the balance, re-holding only a released row; drizzle would hold it only as sql text.
    db
      .prepare(
        `INSERT INTO run_reservations (org_id, run_id, project_id, status, reserved_cents, cost_cents, settled_cents, released_cents, last_op_id, created_at_ms, updated_at_ms)
         SELECT ?1, ?2, ?3, 'held', ?4, NULL, 0, 0, ?5, ?6, ?6 FROM credit_balances b
         WHERE b.org_id = ?1 AND b.granted_cents - b.held_cents - b.spent_cents >= ?4
         ON CONFLICT (org_id, run_id) DO UPDATE SET status = 'held', project_id = excluded.project_id, reserved_cents = excluded.reserved_cents,
           cost_cents = NULL, settled_cents = 0, released_cents = 0, last_op_id = excluded.last_op_id, updated_at_ms = excluded.updated_at_ms
         WHERE run_reservations.status = 'released'`,
      )
      .bind(input.orgId, input.runId, input.projectId, input.cents, opId, nowMs),
    insertRunEntry(db, { orgId: input.orgId, runId: input.runId, opId, kind: "reserve", column: "reserved_cents", note: `autopilot project ${input.projectId}`, nowMs }),
    applyOp(db, input.orgId, opId, nowMs),
  ]);
  if (results[0].meta.changes === 1) return "reserved";
  const existing = await drizzle(db).select({ status: runReservations.status }).from(runReservations).where(reservationOf(input.orgId, input.runId)).get();
  if (!existing || existing.status === "released") return "insufficient_credit";
  return existing.status === "held" ? "already_reserved" : "ended";
}

/** Gives a held reservation back whole: its run was not handed out after all (a later claim holds it again). */
export async function releaseRunBudget(env: Env, orgId: string, runId: string, reason: string): Promise<boolean> {
  const db = env.DB;
  const opId = newId("op");
  const nowMs = Date.now();
  const release = drizzle(db)
    .update(runReservations)
    .set({ status: "released", releasedCents: sql`${runReservations.reservedCents}`, lastOpId: opId, updatedAtMs: nowMs })
    .where(and(reservationOf(orgId, runId), eq(runReservations.status, "held")));
  const results = await db.batch([
    statementOf(db, release),
    insertRunEntry(db, { orgId, runId, opId, kind: "release", column: "released_cents", note: reason, nowMs }),
    applyOp(db, orgId, opId, nowMs),
  ]);
  return results[0].meta.changes === 1;
}

/** The reservation row of a run. */
function reservationOf(orgId: string, runId: string) {
  return and(eq(runReservations.orgId, orgId), eq(runReservations.runId, runId));
}

type ReservationRow = typeof runReservations.$inferSelect;

async function readReservation(db: D1Database, orgId: string, runId: string): Promise<ReservationRow | undefined> {
  return drizzle(db).select().from(runReservations).where(reservationOf(orgId, runId)).get();
}

/** Settles a held reservation from its ended run, exactly once (a compare-and-swap on status 'held'). */
async function settleReservation(env: Env, row: ReservationRow, run: RunView): Promise<void> {
  const holder = { holder: "run" as const, orgId: row.orgId, holderId: row.runId, reservedCents: row.reservedCents };
  const { statements } = runEndStatements(env.DB, { ...holder, run, actor: "scheduler", opId: newId("op"), nowMs: Date.now() });
  await env.DB.batch(statements);
}

/** How the scheduler's budget hold ends, read from the settled (or held for review) reservation. */
function holdEnd(row: ReservationRow): HoldEnd | null {
  if (row.status === "settled") return { status: "settled", costCents: row.settledCents + row.chargedCents };
  if (row.status === "cost_review" || row.status === "reconcile") return { status: "review", costCents: row.costCents };
  return null;
}

/**
 * The outbox consumer's handler: an autopilot run with a model-spend reservation ended, so the
 * reservation settles and the project's budget counts what it cost. Idempotent and order-free: it
 * reads the run object and the reservation row, and each of the two writes is a compare-and-swap.
 */
export async function settleRunBudgetOnRunEvent(env: Env, event: OutboxMessage): Promise<void> {
  const to = terminalStateOf(event);
  if (!to) return;
  const row = await readReservation(env.DB, event.org_id, event.run_id);
  if (!row) return;
  if (row.status === "held") {
    const run = await env.RUN.get(env.RUN.idFromName(event.run_id)).read(event.org_id);
    if ("error" in run || !isTerminal(run.state)) return;
    await settleReservation(env, row, run);
  }
  const after = (await readReservation(env.DB, event.org_id, event.run_id))!;
  const end = holdEnd(after);
  if (!end) return;
  const changed = await env.SCHEDULER.get(env.SCHEDULER.idFromName(event.org_id)).endBudgetHold(after.runId, end);
  if (changed) {
    log("autopilot.budget_settled", { run_id: after.runId, project: after.projectId, status: after.status, reserved_cents: after.reservedCents, cost_cents: after.costCents, reason: `its run ended ${to}` });
  }
}
