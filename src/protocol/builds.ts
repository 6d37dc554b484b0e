// Projects, build requests and build jobs: the paid builds of ../shared/spec/build-lifecycle.md
// (docs/protocol.md, "Builds and credit"). A resource answers one shape wherever it is answered
// (create, change, read); a list shows each item without its nested lists.

import { z } from "zod";
import { epochMs, keysetCursor, labelList, page, pageQuery, prefixedId, tokenId } from "./common.js";
import { CreditEntry } from "./credits.js";
import { envVarName, launchInput, RunState } from "./runs.js";

export const projectId = prefixedId("prj", "a project");
export const buildRequestId = prefixedId("req", "a build request");
/** A job id is chosen by the caller as the dispatch's Idempotency-Key (or made by Docket). */
export const buildJobId = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/, "must be 1-128 letters, digits and . _ : - (starting with a letter or digit)");

/** Environment names a build's sandbox gets from Docket, on top of the project's own launch env. */
export const BUILD_ENV_PREFIX = "DOCKET_";

/**
 * Request labels (build-lifecycle.md). requested → source_review (the owner saved the source plan)
 * → queued (a reservation made a queued job) → review_required or failed. Nothing advances a request
 * to the release-stage labels: they need real release and transaction evidence.
 */
export const REQUEST_LABELS = ["requested", "source_review", "queued", "review_required", "failed", "ready_to_deploy", "live"] as const;
export type RequestLabel = (typeof REQUEST_LABELS)[number];

/** Job statuses: the money and the dispatch (docs/protocol.md, "Dispatch", the status table). */
export const JOB_STATUSES = ["dispatch_unconfirmed", "queued", "cost_review", "reconcile", "settled", "released"] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

export const JOB_OUTCOMES = ["review", "failed", "cancelled"] as const;
export const REVIEW_REASONS = ["cost_above_reservation", "cost_unknown", "ambiguous_failure"] as const;
export const RECONCILE_OUTCOMES = ["dispatched", "released", "unconfirmed", "in_progress", "settled", "held"] as const;

// ---- Requests ----

const githubUrl = z
  .string()
  .max(2_000)
  .regex(/^https:\/\/github\.com\/[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+?(\.git)?\/?$/, "must be a GitHub repository URL like https://github.com/owner/repo");

export const CreateProjectBody = z
  .object({
    name: z.string().trim().min(1).max(200),
    source_url: githubUrl,
    labels: labelList.optional(),
    launch: launchInput(
      envVarName.refine((k) => !k.startsWith(BUILD_ENV_PREFIX), `names starting ${BUILD_ENV_PREFIX} are set by Docket`),
    ),
  })
  .strict();
export type CreateProjectBody = z.infer<typeof CreateProjectBody>;

export const AcceptLicenseBody = z.object({ license: z.string().trim().min(1).max(200), accepted: z.literal(true) }).strict();

export const CreateBuildRequestBody = z.object({ title: z.string().trim().min(1).max(500) }).strict();

/** The source plan (build-lifecycle.md): pinned commit, migration plan and chain target. */
export const BuildPlanBody = z
  .object({
    pinned_commit: z.string().regex(/^[0-9a-f]{40}([0-9a-f]{24})?$/, "must be a full commit hash (40 or 64 hex digits)"),
    migration_plan: z.string().min(1).max(20_000),
    chain_target: z.string().min(1).max(100).regex(/^[A-Za-z0-9._:-]+$/, "must be letters, digits and . _ : -"),
  })
  .strict();

/** A dispatch's body: optional, and when sent an empty JSON object. */
export const DispatchBuildBody = z.object({}).strict();
export type DispatchBuildBody = z.infer<typeof DispatchBuildBody>;

export const ReconcileBuildJobBody = z.object({ action: z.enum(["dispatch", "release"]).optional() }).strict();

export const ResolveBuildJobBody = z
  .object({
    cost_cents: z.number().min(0).max(100_000_000).int(),
    note: z.string().trim().min(1).max(1_000),
  })
  .strict();

export const ListProjectsQuery = z.object(pageQuery(keysetCursor("prj_[0-9a-f]{24}"))).strict();

export const ListBuildRequestsQuery = z
  .object(pageQuery(keysetCursor("req_[0-9a-f]{24}")))
  .extend({ project_id: projectId.optional(), label: z.enum(REQUEST_LABELS).optional() })
  .strict();

export const ListBuildJobsQuery = z
  .object({
    status: z.enum(JOB_STATUSES).optional(),
    request_id: buildRequestId.optional(),
    ...pageQuery(keysetCursor("[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")),
  })
  .strict();

export const ProjectPath = z.object({ id: projectId });
export const BuildRequestPath = z.object({ id: buildRequestId });
export const BuildJobPath = z.object({ id: buildJobId });
export const BuildCallbackPath = z.object({ token: z.string().regex(/^cb_[0-9a-f]{48}$/, "must be a completion callback token") });

// ---- Answers ----

/** What the runner starts for a build (as for runs). */
export const ProjectLaunch = z.object({
  protocol: z.string(),
  command: z.array(z.string()),
  image: z.string().nullable(),
  env: z.record(z.string(), z.string()),
});

/** A project: the same in the create, license, read and list answers. */
export const Project = z.object({
  id: projectId,
  name: z.string(),
  source_url: z.string().describe("its GitHub repository"),
  launch: ProjectLaunch,
  labels: z.array(z.string()).describe("runner labels a build needs"),
  license: z
    .object({ name: z.string(), accepted_at_ms: epochMs, accepted_by: tokenId.describe("the token that accepted it") })
    .nullable()
    .describe("the accepted license, or null: a build needs one"),
  created_by: tokenId,
  created_at_ms: epochMs,
  updated_at_ms: epochMs,
}).meta({ id: "Project" });
export type Project = z.infer<typeof Project>;

export const ProjectPage = page("projects", Project);

/** The saved source plan of a request. */
export const BuildPlan = z.object({
  pinned_commit: z.string(),
  migration_plan: z.string().describe("the plan, which becomes the run's brief"),
  chain_target: z.string().describe("where it deploys"),
  saved_at_ms: epochMs,
  saved_by: tokenId.describe("the token that saved it"),
}).meta({ id: "BuildPlan" });
export type BuildPlan = z.infer<typeof BuildPlan>;

/** What a job sends its run (fixed when the credit is reserved), and what the sandbox gets as DOCKET_* variables. */
export const DispatchPayload = z.object({
  job_id: buildJobId,
  request_id: buildRequestId,
  project_id: projectId,
  source_url: z.string(),
  pinned_commit: z.string(),
  migration_plan: z.string(),
  chain_target: z.string(),
  usd_cap_cents: z.number().int().describe("what the run may spend: the reservation"),
  callback_url: z.string().describe("the job's exact completion callback URL (POST /v1/build-callbacks/:token)"),
});

/** A build job as a list shows it: every field but the run's live state and the ledger entries. */
export const ListedBuildJob = z.object({
  id: buildJobId.describe("the job id: the dispatch's Idempotency-Key, or job_… made by Docket"),
  request_id: buildRequestId,
  project_id: projectId,
  status: z.enum(JOB_STATUSES),
  outcome: z.enum(JOB_OUTCOMES).nullable().describe("once settled or held: review, failed or cancelled"),
  review_reason: z.enum(REVIEW_REASONS).nullable().describe("why it waits for cost review or reconciliation"),
  run_id: z.string().nullable().describe("its run, or null before the run exists"),
  reserved_cents: z.number().int().describe("the reservation made at dispatch"),
  cost_cents: z.number().int().nullable().describe("the run's reported (or resolved) cost"),
  settled_cents: z.number().int().describe("spent from the reservation"),
  released_cents: z.number().int().describe("given back from the reservation"),
  charged_cents: z.number().int().describe("charged above the reservation by a cost review"),
  artifact: z.object({ exists: z.boolean(), empty: z.boolean().nullable().describe("true for an empty patch, null without an artifact") }),
  dispatch: z.object({
    payload: DispatchPayload,
    attempts: z.number().int().describe("creation attempts made"),
    attempted_at_ms: epochMs.describe("the last attempt"),
    confirmed_at_ms: epochMs.nullable().describe("when the run's creation was confirmed"),
    last_error: z.string().nullable(),
  }),
  resolution: z
    .object({ note: z.string(), by: z.string().describe("member:<token id>"), at_ms: epochMs })
    .nullable()
    .describe("an admin's resolution of a held job"),
  recovery: z
    .object({
      dispatch_accepted: z.boolean().nullable().describe("null while the dispatch is unconfirmed"),
      reservation_held: z.boolean(),
      cost_known: z.boolean(),
      cost_charged: z.boolean(),
      charged_cents: z.number().int(),
      artifact_exists: z.boolean(),
      next_action: z.string(),
    })
    .describe("what an operator needs first (docs/protocol.md, \"Cost review and reconciliation\")"),
  created_by: tokenId,
  created_at_ms: epochMs,
  updated_at_ms: epochMs,
  ended_at_ms: epochMs.nullable().describe("when it was settled or released"),
}).meta({ id: "ListedBuildJob" });
export type ListedBuildJob = z.infer<typeof ListedBuildJob>;

/** A build job: the same in the dispatch, read, resolve and reconcile answers. */
export const BuildJob = ListedBuildJob.extend({
  run: z
    .object({ id: z.string(), state: RunState, attempt: z.number().int(), phase: z.string().nullable(), cost_cents: z.number().int().nullable(), ended_at_ms: epochMs.nullable() })
    .nullable()
    .describe("the run's live state, or null without a run (or while its object cannot be read)"),
  entries: z.array(CreditEntry).describe("its latest 20 ledger entries, newest first"),
}).meta({ id: "BuildJob" });
export type BuildJob = z.infer<typeof BuildJob>;

/** The dispatch answer: the job, and why it is 202 when it is. */
export const DispatchedBuildJob = BuildJob.extend({
  message: z.string().nullable().describe("null unless the answer is 202: the dispatch is unconfirmed and will be reconciled"),
});

export const BuildJobPage = page("jobs", ListedBuildJob);

/** A build request as a list shows it: every field but its jobs. */
export const ListedBuildRequest = z.object({
  id: buildRequestId,
  project_id: projectId,
  title: z.string(),
  label: z.enum(REQUEST_LABELS).describe("its page label"),
  plan: BuildPlan.nullable().describe("the saved source plan, or null"),
  created_by: tokenId,
  created_at_ms: epochMs,
  updated_at_ms: epochMs,
}).meta({ id: "ListedBuildRequest" });
export type ListedBuildRequest = z.infer<typeof ListedBuildRequest>;

/** A build request: the same in the create, plan and read answers, with its latest jobs. */
export const BuildRequest = ListedBuildRequest.extend({
  jobs: z.array(ListedBuildJob).describe("its latest 20 jobs, newest first"),
}).meta({ id: "BuildRequest" });
export type BuildRequest = z.infer<typeof BuildRequest>;

export const BuildRequestPage = page("requests", ListedBuildRequest);

/** A job's artifact as a reviewer sees it. */
export const BuildArtifact = z.object({
  job_id: buildJobId,
  run_id: z.string(),
  outcome: z.enum(JOB_OUTCOMES).nullable(),
  run_state: RunState,
  patch: z.string(),
  empty: z.boolean().describe("a patch with no content"),
  incomplete: z.boolean().describe("the run did not complete, or a command exited non-zero"),
  notes: z.array(z.string()).describe("what is empty or incomplete, in words"),
  source_revision: z.string().nullable(),
  exit_codes: z.record(z.string(), z.number().int()),
  model: z.string().nullable(),
  limitations: z.array(z.string()),
});
export type BuildArtifact = z.infer<typeof BuildArtifact>;

export const ReconciledBuildJob = z.object({
  outcome: z.enum(RECONCILE_OUTCOMES),
  message: z.string(),
  job: BuildJob,
});

/** The completion callback's answer. */
export const BuildCallbackAnswer = z.object({ job_id: buildJobId, status: z.enum(JOB_STATUSES) });
export type BuildCallbackAnswer = z.infer<typeof BuildCallbackAnswer>;
