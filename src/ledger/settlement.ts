// How a finished run's cost meets its job's reservation: a pure decision, no I/O
// (../shared/spec/build-lifecycle.md, "Events and completion retry independently").

import { DocketError } from "../errors";

export type JobOutcome = "review" | "failed" | "cancelled";

export type ReviewReason = "cost_above_reservation" | "cost_unknown" | "ambiguous_failure";

export type SettlementDecision =
  /** Settle the cost (within the reservation) and release the rest: the job is done. */
  | { kind: "settle"; outcome: JobOutcome; costCents: number; settleCents: number; releaseCents: number }
  /** Keep the whole reservation held until an admin resolves the cost (cost_review) or the failure (reconcile). */
  | { kind: "hold"; status: "cost_review" | "reconcile"; outcome: JobOutcome; costCents: number | null; reason: ReviewReason };

/** What the decision needs to know about the finished run. */
export interface FinishedRun {
  state: "completed" | "failed" | "cancelled";
  cost_cents: number | null;
  /** True when any attempt launched a sandbox, so paid work may have happened. */
  launched: boolean;
}

export function outcomeOf(state: FinishedRun["state"]): JobOutcome {
  return state === "completed" ? "review" : state;
}

/**
 * "A confirmed completion records a review or failed outcome and reported cost within the
 * reservation. An accepted completion releases unused reserved credit … ambiguous failures remain
 * held for reconciliation" (build-lifecycle.md, "Events and completion retry independently").
 * A cost above the reservation, or an unknown cost, is never capped silently: it goes to cost
 * review. A run that never launched did no paid work: its cost is zero.
 */
export function decideSettlement(reservedCents: number, run: FinishedRun): SettlementDecision {
  if (!Number.isSafeInteger(reservedCents) || reservedCents < 0) throw new Error(`bad reservation ${reservedCents}`);
  const outcome = outcomeOf(run.state);
  const cost = run.cost_cents ?? (run.launched ? null : 0);
  if (cost === null) {
    return outcome === "review"
      ? { kind: "hold", status: "cost_review", outcome, costCents: null, reason: "cost_unknown" }
      : { kind: "hold", status: "reconcile", outcome, costCents: null, reason: "ambiguous_failure" };
  }
  if (!Number.isSafeInteger(cost) || cost < 0) throw new Error(`bad cost ${cost}`);
  if (cost > reservedCents) return { kind: "hold", status: "cost_review", outcome, costCents: cost, reason: "cost_above_reservation" };
  return { kind: "settle", outcome, costCents: cost, settleCents: cost, releaseCents: reservedCents - cost };
}

/**
 * An admin's resolution of a held job with the reconciled cost: the part within the reservation is
 * settled, the rest of the reservation released, and any part above it charged to available
 * credit (which must cover it).
 */
export function resolveCost(reservedCents: number, costCents: number) {
  const settleCents = Math.min(costCents, reservedCents);
  return { settleCents, releaseCents: reservedCents - settleCents, chargeCents: costCents - settleCents };
}

/** A resolution refused because available credit does not cover its charge above the reservation. */
export function chargeNotCovered(chargeCents: number): DocketError {
  return new DocketError("insufficient_credit", `the cost above the reservation (${chargeCents} cents) exceeds the available credit; grant credit first`, {
    needed_cents: chargeCents,
  });
}
