// Build request labels and job statuses as data (../shared/spec/build-lifecycle.md). Labels are
// what a request's page shows; job statuses track the money and the dispatch. Runner states are
// separate from both ("Runner states are separate from page labels").

import { JOB_STATUSES, REQUEST_LABELS, type JobStatus, type RequestLabel } from "../protocol/builds";

// Request labels and job statuses are part of the contract (src/protocol/builds.ts).
export { JOB_STATUSES, REQUEST_LABELS, type JobStatus, type RequestLabel };

/** Labels from which the owner may (re)save the plan; never while a job holds a reservation. */
export const PLAN_EDITABLE_LABELS: readonly RequestLabel[] = ["requested", "source_review", "review_required", "failed"];

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
