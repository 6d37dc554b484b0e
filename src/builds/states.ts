// Build request labels and job statuses as data (../shared/spec/build-lifecycle.md). Labels are
// what a request's page shows; job statuses track the money and the dispatch. Runner states are
// separate from both ("Runner states are separate from page labels").

/**
 * Request labels. requested → source_review (the owner saved the source plan) → queued (a
 * reservation made a queued job) → review_required (a review completion) or failed. The
 * release-stage labels exist, but nothing advances a request to them: they need real release and
 * transaction evidence ("Completion means an artifact is ready for review").
 */
export const REQUEST_LABELS = ["requested", "source_review", "queued", "review_required", "failed", "ready_to_deploy", "live"] as const;
export type RequestLabel = (typeof REQUEST_LABELS)[number];

/** Labels from which the owner may (re)save the plan; never while a job holds a reservation. */
export const PLAN_EDITABLE_LABELS: readonly RequestLabel[] = ["requested", "source_review", "review_required", "failed"];

/**
 * Job statuses.
 * - dispatch_unconfirmed: credit reserved, the run's creation not confirmed (yet); reconciled later.
 * - queued: the run exists; the job stays queued until the run ends (the request label does not
 *   follow every runner transition: the run's events are the finer-grained feed).
 * - cost_review: the run finished with a cost above the reservation, or an unknown cost.
 * - reconcile: the run failed or was cancelled after launching and reported no cost (ambiguous).
 * - settled: the cost was settled and the rest released, exactly once.
 * - released: no run was ever created; the whole reservation went back.
 */
export const JOB_STATUSES = ["dispatch_unconfirmed", "queued", "cost_review", "reconcile", "settled", "released"] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

/** Statuses whose reservation is held (mirrors HELD_JOB_STATUSES_SQL in src/db/ledger-schema.ts). */
export const HELD_JOB_STATUSES: readonly JobStatus[] = ["dispatch_unconfirmed", "queued", "cost_review", "reconcile"];
/** A request "already has a queued job" while one of its jobs is in one of these. */
export const OPEN_JOB_STATUSES: readonly JobStatus[] = ["dispatch_unconfirmed", "queued"];
/** Held for an admin: cost review or reconciliation. */
export const REVIEW_JOB_STATUSES: readonly JobStatus[] = ["cost_review", "reconcile"];

/** The request label a job's outcome leads to. A cancelled job had nothing to review: back to source review. */
export function labelForOutcome(outcome: "review" | "failed" | "cancelled"): RequestLabel {
  return outcome === "review" ? "review_required" : outcome === "failed" ? "failed" : "source_review";
}
