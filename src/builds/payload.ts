// What a build job sends to the run engine, and how projects, requests and jobs look in the API.

import type { buildJobs, buildRequests, projects } from "../db/ledger-schema";
import type { BuildPlan, ListedBuildJob, ListedBuildRequest, Project, RequestLabel } from "../protocol/builds";
import type { DispatchInput } from "../run/dispatch";
import type { LaunchSpec } from "../run/types";
import { HELD_JOB_STATUSES, type JobStatus } from "./states";

export type ProjectRow = typeof projects.$inferSelect;
export type RequestRow = typeof buildRequests.$inferSelect;
export type JobRow = typeof buildJobs.$inferSelect;

/**
 * The dispatch payload of ../shared/spec/build-lifecycle.md, "Dispatch uses a stable job
 * identifier": job and request ids, GitHub source URL, pinned commit, migration plan, chain target,
 * USD cap and the exact completion callback URL. It is fixed when the credit is reserved, so every
 * retry of the dispatch sends exactly the same payload under the same key (the job id).
 */
export function dispatchPayload(job: JobRow) {
  return {
    job_id: job.id,
    request_id: job.requestId,
    project_id: job.projectId,
    source_url: job.sourceUrl,
    pinned_commit: job.pinnedCommit,
    migration_plan: job.migrationPlan,
    chain_target: job.chainTarget,
    // The runner may spend at most what is reserved.
    usd_cap_cents: job.reservedCents,
    callback_url: job.callbackUrl,
  };
}

/** Environment the sandbox gets for a build, on top of the project's own launch env. */
export { BUILD_ENV_PREFIX } from "../protocol/builds";

/** The run the job becomes: a pure function of the job row, so retries never conflict with themselves. */
export function runBodyFor(job: JobRow): DispatchInput {
  const p = dispatchPayload(job);
  const launch = JSON.parse(job.launch) as LaunchSpec;
  return {
    brief: p.migration_plan,
    repository: { url: p.source_url, commit: p.pinned_commit },
    labels: JSON.parse(job.labels) as string[],
    launch: {
      protocol: launch.protocol,
      command: launch.command,
      image: launch.image,
      env: {
        ...launch.env,
        DOCKET_JOB_ID: p.job_id,
        DOCKET_REQUEST_ID: p.request_id,
        DOCKET_PROJECT_ID: p.project_id,
        DOCKET_SOURCE_URL: p.source_url,
        DOCKET_PINNED_COMMIT: p.pinned_commit,
        DOCKET_CHAIN_TARGET: p.chain_target,
        DOCKET_USD_CAP_CENTS: String(p.usd_cap_cents),
      },
    },
    callback_url: p.callback_url,
    metadata: {
      docket_job_id: p.job_id,
      docket_request_id: p.request_id,
      docket_project_id: p.project_id,
      docket_chain_target: p.chain_target,
      docket_usd_cap_cents: String(p.usd_cap_cents),
    },
  };
}

// The views are typed by the contract (src/protocol/builds.ts). A license's and a plan's fields are
// written together with their time, so they are set whenever the time is.

export function projectView(p: ProjectRow): Project {
  return {
    id: p.id,
    name: p.name,
    source_url: p.sourceUrl,
    launch: JSON.parse(p.launch) as LaunchSpec,
    labels: JSON.parse(p.labels) as string[],
    license: p.licenseAcceptedAtMs === null ? null : ({ name: p.licenseName, accepted_at_ms: p.licenseAcceptedAtMs, accepted_by: p.licenseAcceptedBy } as NonNullable<Project["license"]>),
    created_by: p.createdBy,
    created_at_ms: p.createdAtMs,
    updated_at_ms: p.updatedAtMs,
  };
}

export function requestView(r: RequestRow): ListedBuildRequest {
  return {
    id: r.id,
    project_id: r.projectId,
    title: r.title,
    label: r.label as RequestLabel,
    plan:
      r.planSavedAtMs === null
        ? null
        : ({ pinned_commit: r.pinnedCommit, migration_plan: r.migrationPlan, chain_target: r.chainTarget, saved_at_ms: r.planSavedAtMs, saved_by: r.planSavedBy } as BuildPlan),
    created_by: r.createdBy,
    created_at_ms: r.createdAtMs,
    updated_at_ms: r.updatedAtMs,
  };
}

/**
 * What an operator needs first when recovering a job (build-lifecycle.md, "Recover without
 * duplicating spend"): was the dispatch accepted, was cost charged, does an artifact exist, and
 * what to do next.
 */
function recoveryView(j: JobRow): ListedBuildJob["recovery"] {
  const status = j.status as JobStatus;
  const next: Record<JobStatus, string> = {
    dispatch_unconfirmed: "reconcile the dispatch: POST /v1/build-jobs/:id/reconcile (or repeat the dispatch with the same Idempotency-Key)",
    queued: "none: the run is in progress; settlement follows its end (POST /v1/build-jobs/:id/reconcile re-checks)",
    cost_review: "an admin resolves the cost: POST /v1/build-jobs/:id/resolve",
    reconcile: "an admin reconciles the cost of the failed run: POST /v1/build-jobs/:id/resolve",
    settled: "none",
    released: "none",
  };
  return {
    dispatch_accepted: status === "dispatch_unconfirmed" ? null : status !== "released",
    reservation_held: HELD_JOB_STATUSES.includes(status),
    cost_known: j.costCents !== null || status === "settled",
    cost_charged: status === "settled",
    charged_cents: status === "settled" ? j.settledCents + j.chargedCents : 0,
    artifact_exists: j.artifactExists,
    next_action: next[status],
  };
}

export function jobView(j: JobRow): ListedBuildJob {
  return {
    id: j.id,
    request_id: j.requestId,
    project_id: j.projectId,
    status: j.status as JobStatus,
    outcome: j.outcome as ListedBuildJob["outcome"],
    review_reason: j.reviewReason as ListedBuildJob["review_reason"],
    run_id: j.runId,
    reserved_cents: j.reservedCents,
    cost_cents: j.costCents,
    settled_cents: j.settledCents,
    released_cents: j.releasedCents,
    charged_cents: j.chargedCents,
    artifact: { exists: j.artifactExists, empty: j.artifactEmpty },
    dispatch: {
      payload: dispatchPayload(j),
      attempts: j.dispatchAttempts,
      attempted_at_ms: j.dispatchAttemptedAtMs,
      confirmed_at_ms: j.dispatchConfirmedAtMs,
      last_error: j.dispatchError,
    },
    resolution: j.resolvedAtMs === null ? null : ({ note: j.resolutionNote, by: j.resolvedBy, at_ms: j.resolvedAtMs } as NonNullable<ListedBuildJob["resolution"]>),
    recovery: recoveryView(j),
    created_by: j.createdBy,
    created_at_ms: j.createdAtMs,
    updated_at_ms: j.updatedAtMs,
    ended_at_ms: j.endedAtMs,
  };
}
