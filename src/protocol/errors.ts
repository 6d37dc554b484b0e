// Every error answer is {"error": {"code", "message", ...details}} with a stable code and the HTTP
// status it maps to (../shared/DESIGN.md, "Protocol essentials"; docs/protocol.md, "Errors").

import { z } from "zod";

export const ERROR_STATUS = {
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  other_organization: 403,
  not_found: 404,
  method_not_allowed: 405,
  other_machine: 409,
  stale_attempt: 409,
  lease_expired: 409,
  stale_report: 409,
  invalid_transition: 409,
  idempotency_conflict: 409,
  last_admin_token: 409,
  task_gone: 410,
  events_pruned: 410,
  listener_upgrade_required: 426,
  too_many_streams: 429,
  too_many_waiters: 429,
  rate_limited: 429,
  payload_too_large: 413,
  // Builds and credit (../shared/spec/build-lifecycle.md; docs/protocol.md, "Builds and credit").
  insufficient_credit: 402,
  plan_required: 409,
  license_required: 409,
  no_connected_runner: 409,
  job_already_queued: 409,
  cost_review_pending: 409,
  request_locked: 409,
  job_not_held: 409,
  dispatch_in_flight: 409,
  // An autopilot run's model-spend reservation (docs/protocol.md, "Run reservations and cost review").
  reservation_not_held: 409,
  // Autopilot projects (docs/protocol.md, "Autopilot projects").
  autopilot_project_exists: 409,
  autopilot_not_configured: 503,
  // An admin's reconcile request (docs/protocol.md, "Autopilot admission"): GitHub did not answer or refused the App.
  github_unavailable: 502,
  // Publication (docs/protocol.md, "Publication"): the code host did not issue a push credential.
  publication_unavailable: 503,
  // Managed runner pools (docs/managed-runners.md): a name taken, a limit reached, a deployment without containers.
  managed_pool_exists: 409,
  managed_pool_limit: 409,
  managed_runners_unavailable: 501,
  // Pause and resume (docs/protocol.md, "Pause and resume").
  checkpoint_missing: 409,
  // Recovery after an outage or a deploy (docs/protocol.md, "Recovery"): claims wait until unfinished runs are reconciled.
  recovering: 503,
  internal: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export const ERROR_CODES = Object.keys(ERROR_STATUS) as [ErrorCode, ...ErrorCode[]];

/** The error object: a code, a message for people, and details that depend on the code. */
export const ErrorDetail = z.looseObject({
  code: z.enum(ERROR_CODES),
  message: z.string(),
});

/** The body of every error answer. */
export const ErrorAnswer = z.object({ error: ErrorDetail });
export type ErrorAnswer = z.infer<typeof ErrorAnswer>;
