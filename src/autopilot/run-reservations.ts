// An autopilot project's run reservations and an admin's resolution of one held for cost review
// (docs/protocol.md, "Run reservations and cost review"): one resolution for a build job and a run
// reservation (src/ledger/settle-held.ts resolveHeld; ../shared/spec/build-lifecycle.md, "Recover
// without duplicating spend"): within the reservation the cost is settled and the rest released,
// above it the excess is charged to available credit, which must cover it; never capped silently.

import { and, desc, eq, inArray, type SQL } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { runReservations } from "../db/ledger-schema";
import { autopilotProjects } from "../db/autopilot-schema";
import type { Env } from "../env";
import { DocketError } from "../errors";
import { log } from "../lib/log";
import { listPage } from "../lib/pagination";
import { resolveHeld, REVIEW_STATUSES, type Resolution } from "../ledger/settle-held";
import type { RunReservation } from "../protocol/run-reservations";

type ReservationRow = typeof runReservations.$inferSelect;

export function reservationView(r: ReservationRow): RunReservation {
  return {
    run_id: r.runId,
    project_id: r.projectId,
    status: r.status as RunReservation["status"],
    reserved_cents: r.reservedCents,
    cost_cents: r.costCents,
    settled_cents: r.settledCents,
    released_cents: r.releasedCents,
    charged_cents: r.chargedCents,
    resolution: r.resolvedAtMs === null ? null : { note: r.resolutionNote ?? "", by: r.resolvedBy ?? "", at_ms: r.resolvedAtMs },
    created_at_ms: r.createdAtMs,
    updated_at_ms: r.updatedAtMs,
  };
}

/**
 * The organization's reservations that hold credit or wait for an admin's cost review, across its
 * projects, most recently reserved first, each with its project's name (the dashboard's credits page).
 */
export async function openReservations(db: D1Database, orgId: string, limit: number): Promise<(RunReservation & { project_name: string })[]> {
  const rows = await drizzle(db)
    .select({ reservation: runReservations, projectName: autopilotProjects.name })
    .from(runReservations)
    .innerJoin(autopilotProjects, and(eq(autopilotProjects.id, runReservations.projectId), eq(autopilotProjects.orgId, runReservations.orgId)))
    .where(and(eq(runReservations.orgId, orgId), inArray(runReservations.status, ["held", ...REVIEW_STATUSES])))
    .orderBy(desc(runReservations.createdAtMs), desc(runReservations.runId))
    .limit(limit);
  return rows.map((r) => ({ ...reservationView(r.reservation), project_name: r.projectName }));
}

/** A page of the project's run reservations, most recently reserved first. */
export async function listReservations(env: Env, q: { orgId: string; projectId: string; status?: string; cursor?: string; limit: number }) {
  const conditions: SQL[] = [eq(runReservations.orgId, q.orgId), eq(runReservations.projectId, q.projectId)];
  if (q.status) conditions.push(eq(runReservations.status, q.status));
  const { kept, next } = await listPage(env.DB, runReservations, conditions, q.cursor, q.limit, { at: "createdAtMs", id: "runId" });
  return { reservations: kept.map(reservationView), next_cursor: next };
}

async function loadReservation(db: D1Database, orgId: string, projectId: string, runId: string): Promise<ReservationRow> {
  const row = await drizzle(db)
    .select()
    .from(runReservations)
    .where(and(eq(runReservations.orgId, orgId), eq(runReservations.projectId, projectId), eq(runReservations.runId, runId)))
    .get();
  if (!row) throw new DocketError("not_found", `no model-spend reservation of run ${runId} in autopilot project ${projectId}`);
  return row;
}

function notHeld(row: ReservationRow): DocketError {
  return new DocketError("reservation_not_held", `the reservation of run ${row.runId} is ${row.status}, not held for cost review or reconciliation`, { status: row.status });
}

/**
 * The scheduler's budget hold of a resolved reservation settles with the resolved cost. Called
 * after a resolution and again by a refused second one, so a hold whose first call failed still
 * ends; a failure here never undoes the resolution, whose money has moved.
 */
async function settleBudgetHold(env: Env, row: ReservationRow): Promise<void> {
  if (row.status !== "settled" || row.resolvedAtMs === null || row.costCents === null) return;
  try {
    const changed = await env.SCHEDULER.get(env.SCHEDULER.idFromName(row.orgId)).settleReviewedBudgetHold(row.runId, row.costCents);
    if (changed) log("autopilot.budget_settled", { run_id: row.runId, project: row.projectId, status: row.status, reserved_cents: row.reservedCents, cost_cents: row.costCents, reason: "an admin resolved its cost review" });
  } catch (err) {
    log("scheduler.budget_settle_failed", { run_id: row.runId, project: row.projectId, reason: `the scheduler did not settle the budget hold (${String(err)}); resolving again applies it` });
  }
}

/** Resolves a reservation held for cost review or reconciliation with the reconciled cost (resolveHeld). */
export async function resolveReservation(env: Env, key: { orgId: string; projectId: string; runId: string }, input: Resolution): Promise<RunReservation> {
  const row = await loadReservation(env.DB, key.orgId, key.projectId, key.runId);
  if (!REVIEW_STATUSES.includes(row.status)) {
    await settleBudgetHold(env, row);
    throw notHeld(row);
  }
  const after = await resolveHeld(env.DB, {
    holder: "run",
    orgId: key.orgId,
    holderId: key.runId,
    row,
    load: () => loadReservation(env.DB, key.orgId, key.projectId, key.runId),
    notHeld,
    logged: { event: "ledger.run_reservation_resolved", fields: { org: key.orgId, project: key.projectId, run_id: key.runId }, reason: "an admin resolved a held run reservation" },
  }, input);
  await settleBudgetHold(env, after);
  return reservationView(after);
}
