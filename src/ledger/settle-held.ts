// How a reservation stops being held, the same for each holder (a build job, an autopilot run's
// model spend): its run's end settles it once, or keeps it held for cost review, and an admin
// resolves one held for review with the reconciled cost (../shared/spec/build-lifecycle.md,
// "Events and completion retry independently" and "Recover without duplicating spend"). Each is
// one batch whose first statement is the compare-and-swap that decides (see ./entries.ts).

import type { DocketError } from "../errors";
import { newId } from "../lib/crypto";
import { log } from "../lib/log";
import type { RunView } from "../run/view";
import { applyOp, HOLDERS, insertHeldEntry, type AmountColumn, type Holder } from "./entries";
import { chargeNotCovered, decideSettlement, resolveCost, type SettlementDecision } from "./settlement";

/** The statuses of a holder waiting for an admin's resolution: cost review or reconciliation. */
export const REVIEW_STATUSES: readonly string[] = ["cost_review", "reconcile"];

/** A holder's statuses in which its run's end settles it: it holds the reservation for a run not yet ended. */
const OPEN_STATUSES: Readonly<Record<Holder, string>> = {
  job: "status IN ('dispatch_unconfirmed', 'queued')",
  run: "status = 'held'",
};

/** One `column = expression` of an UPDATE, its expression holding exactly one bound parameter. */
type Assignment = readonly [sql: string, value: unknown];

/** What a run's end records on any holder: how it ended and, when it settled, the two amounts. */
function sharedAssignments(d: SettlementDecision, opId: string, nowMs: number): Assignment[] {
  const amounts: Assignment[] = d.kind === "settle" ? [["settled_cents = ?", d.settleCents], ["released_cents = ?", d.releaseCents]] : [];
  return [["status = ?", d.kind === "settle" ? "settled" : d.status], ["cost_cents = ?", d.costCents], ...amounts, ["last_op_id = ?", opId], ["updated_at_ms = ?", nowMs]];
}

/** What a build job also records: its outcome, why it waits for review, its run and artifact, and when it ended. */
function jobAssignments(d: SettlementDecision, run: RunView, nowMs: number): Assignment[] {
  return [
    ["outcome = ?", d.outcome],
    ["review_reason = ?", d.kind === "hold" ? d.reason : null],
    ["run_id = ?", run.id],
    ["artifact_exists = ?", run.artifact !== null ? 1 : 0],
    ["artifact_empty = ?", run.artifact === null ? null : run.artifact.empty ? 1 : 0],
    ["dispatch_confirmed_at_ms = COALESCE(dispatch_confirmed_at_ms, ?)", nowMs],
    ["ended_at_ms = ?", nowMs],
  ];
}

/**
 * The batch that settles a holder from its ended run (decideSettlement): the compare-and-swap on
 * the holder, open and with the reservation it was read with, then, when it settles, the cost
 * within the reservation settled, the rest released and the balance update. A hold for cost
 * review moves no money. The first statement changed a row exactly when this settlement won.
 */
export function runEndStatements(
  db: D1Database,
  e: { holder: Holder; orgId: string; holderId: string; reservedCents: number; run: RunView; actor: string; opId: string; nowMs: number },
): { decision: SettlementDecision; statements: D1PreparedStatement[] } {
  const { run, opId, nowMs } = e;
  const decision = decideSettlement(e.reservedCents, {
    state: run.state as "completed" | "failed" | "cancelled",
    cost_cents: run.cost_cents,
    launched: run.steps.some((s) => s.launched_at_ms !== null),
  });
  const h = HOLDERS[e.holder];
  const set = [...sharedAssignments(decision, opId, nowMs), ...(e.holder === "job" ? jobAssignments(decision, run, nowMs) : [])];
  // Raw SQL: the compare-and-swap that decides, one text for either holder's table (HOLDERS), as the entries it guards are.
  const decide = db
    .prepare(`UPDATE ${h.table} SET ${set.map(([sql]) => sql).join(", ")} WHERE org_id = ? AND ${h.key} = ? AND ${OPEN_STATUSES[e.holder]} AND reserved_cents = ?`)
    .bind(...set.map(([, value]) => value), e.orgId, e.holderId, e.reservedCents);
  if (decision.kind === "hold") return { decision, statements: [decide] };
  const entry = (kind: "settle" | "release", amountColumn: AmountColumn, note: string) =>
    insertHeldEntry(db, { holder: e.holder, orgId: e.orgId, holderId: e.holderId, opId, kind, amountColumn, actor: e.actor, note, nowMs });
  const statements = [decide, entry("settle", "settled_cents", `run ${run.id} ${run.state}`), entry("release", "released_cents", "unused reservation"), applyOp(db, e.orgId, opId, nowMs)];
  return { decision, statements };
}

/** What a resolution also records on a holder beyond the shared columns: a job's end time (?5, now). */
const RESOLUTION_EXTRA_SET: Readonly<Record<Holder, string>> = {
  job: ", ended_at_ms = COALESCE(ended_at_ms, ?5)",
  run: "",
};

/**
 * An admin's resolution of a holder held for cost review or reconciliation (status cost_review or
 * reconcile) with the reconciled cost, as one batch: the compare-and-swap that decides (it holds
 * only while the reservation is unchanged and, for a cost above it, available credit covers the
 * charge), then the cost within the reservation settled, the rest released, any part above it
 * charged, and the balance update. The first statement changed a row exactly when it happened.
 */
function resolutionStatements(
  db: D1Database,
  e: { holder: Holder; orgId: string; holderId: string; reservedCents: number; costCents: number; actor: string; note: string; opId: string; nowMs: number },
): { statements: D1PreparedStatement[]; chargeCents: number } {
  const h = HOLDERS[e.holder];
  const { settleCents, releaseCents, chargeCents } = resolveCost(e.reservedCents, e.costCents);
  // Raw SQL: the compare-and-swap that decides, guarded by the balance that must cover the charge, for either holder's table.
  const decide = db
    .prepare(
      `UPDATE ${h.table} SET status = 'settled', cost_cents = ?1, settled_cents = ?2, released_cents = ?3, charged_cents = ?4,
         resolution_note = ?6, resolved_by = ?7, resolved_at_ms = ?5, last_op_id = ?8, updated_at_ms = ?5${RESOLUTION_EXTRA_SET[e.holder]}
       WHERE org_id = ?9 AND ${h.key} = ?10 AND status IN ('cost_review', 'reconcile') AND reserved_cents = ?11
         AND (?4 = 0 OR (SELECT granted_cents - held_cents - spent_cents FROM credit_balances WHERE org_id = ?9) >= ?4)`,
    )
    .bind(e.costCents, settleCents, releaseCents, chargeCents, e.nowMs, e.note, e.actor, e.opId, e.orgId, e.holderId, e.reservedCents);
  const note = `resolved: ${e.note}`;
  const entry = (kind: "settle" | "release" | "charge", amountColumn: AmountColumn, entryNote: string) =>
    insertHeldEntry(db, { holder: e.holder, orgId: e.orgId, holderId: e.holderId, opId: e.opId, kind, amountColumn, actor: e.actor, note: entryNote, nowMs: e.nowMs });
  const statements = [
    decide,
    entry("settle", "settled_cents", note),
    entry("release", "released_cents", note),
    entry("charge", "charged_cents", `${note} (above the reservation)`),
    applyOp(db, e.orgId, e.opId, e.nowMs),
  ];
  return { statements, chargeCents };
}

/** An admin's resolution: the reconciled cost, why, and who resolved it. */
export interface Resolution {
  costCents: number;
  note: string;
  actor: string;
}

/** A holder's row as a resolution reads it. */
interface HeldRow {
  status: string;
  reservedCents: number;
  settledCents: number;
  releasedCents: number;
}

/** A holder to resolve: its row as read, how to read it again, its refusal, and its log line. */
interface HeldForReview<R extends HeldRow> {
  holder: Holder;
  orgId: string;
  holderId: string;
  row: R;
  load: () => Promise<R>;
  notHeld: (row: R) => DocketError;
  logged: { event: string; fields: Record<string, unknown>; reason: string };
}

/**
 * Resolves a holder held for cost review or reconciliation with the reconciled cost, in one
 * conditional batch: within the reservation the cost settles and the rest is released; above it
 * the excess is charged to available credit, which must cover it, never silently capped. Of two
 * concurrent resolutions one wins, the other is refused as not held. Returns the row after it.
 */
export async function resolveHeld<R extends HeldRow>(db: D1Database, held: HeldForReview<R>, input: Resolution): Promise<R> {
  if (!REVIEW_STATUSES.includes(held.row.status)) throw held.notHeld(held.row);
  const holder = { holder: held.holder, orgId: held.orgId, holderId: held.holderId, reservedCents: held.row.reservedCents };
  const { statements, chargeCents } = resolutionStatements(db, { ...holder, ...input, opId: newId("op"), nowMs: Date.now() });
  const results = await db.batch(statements);
  const after = await held.load();
  if (results[0].meta.changes !== 1) {
    if (!REVIEW_STATUSES.includes(after.status)) throw held.notHeld(after);
    throw chargeNotCovered(chargeCents);
  }
  const amounts = { cost_cents: input.costCents, settled_cents: after.settledCents, released_cents: after.releasedCents, charged_cents: chargeCents };
  log(held.logged.event, { ...held.logged.fields, ...amounts, actor: input.actor, reason: held.logged.reason });
  return after;
}
