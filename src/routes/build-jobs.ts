// Build jobs: find one by id, its artifact, reconciliation and cost review (admin), and the
// completion callback (../shared/spec/build-lifecycle.md, "Completion means an artifact is ready for
// review" and "Recover without duplicating spend"; docs/runbook.md).

import { eq } from "drizzle-orm";
import { Hono } from "hono";
import type { AppEnv } from "../app-types";
import { completeByCallback, reconcileJob } from "../builds/reconcile";
import { jobView } from "../builds/payload";
import { runEngine } from "../builds/run-engine";
import { resolveJob } from "../builds/settle";
import { loadJob } from "../builds/store";
import { buildJobs } from "../db/ledger-schema";
import { DocketError } from "../errors";
import { listPage, pageSize } from "../lib/pagination";
import { operation } from "../openapi/operation";
import {
  BuildArtifact,
  BuildCallbackAnswer,
  BuildCallbackPath,
  BuildJob,
  BuildJobPage,
  BuildJobPath,
  ListBuildJobsQuery,
  ReconcileBuildJobBody,
  ReconciledBuildJob,
  ResolveBuildJobBody,
} from "../protocol/builds";
import type { RunView } from "../run/view";
import { validate } from "../validate";
import { jobAnswer } from "./job-answer";
import { resolveHandler } from "./resolve-held";

const TAG = "Projects and builds";

/** The artifact as a reviewer sees it: an empty or incomplete patch is said to be one. */
function artifactView(jobId: string, outcome: string | null, run: RunView): BuildArtifact {
  const a = run.artifact!;
  const failedCommands = Object.entries(a.exit_codes).filter(([, code]) => code !== 0);
  const notes: string[] = [];
  if (a.empty) notes.push("the patch is empty: the run returned no changes");
  if (run.state !== "completed") notes.push(`the run ended ${run.state}: the patch may be incomplete`);
  for (const [name, code] of failedCommands) notes.push(`command ${name} exited with ${code}`);
  return {
    job_id: jobId,
    run_id: run.id,
    outcome: outcome as BuildArtifact["outcome"],
    run_state: run.state,
    patch: a.patch,
    empty: a.empty,
    incomplete: run.state !== "completed" || failedCommands.length > 0,
    notes,
    source_revision: a.source_revision,
    exit_codes: a.exit_codes,
    model: a.model,
    limitations: a.limitations,
  };
}

export const buildJobRoutes = new Hono<AppEnv>()
  .get(
    "/build-jobs",
    operation({
      id: "listBuildJobs",
      summary: "List build jobs",
      description: "Optionally with one status or of one request. A listed job has no run or ledger entries: read it for them.",
      tag: TAG,
      auth: "member",
      responses: { 200: { description: "A page of build jobs, newest first.", schema: BuildJobPage } },
    }),
    validate("query", ListBuildJobsQuery),
    async (c) => {
      const q = c.req.valid("query");
      const limit = pageSize(q.limit, 50, c.get("config").pageSizeMax);
      const conditions = [eq(buildJobs.orgId, c.get("caller").orgId)];
      if (q.status) conditions.push(eq(buildJobs.status, q.status));
      if (q.request_id) conditions.push(eq(buildJobs.requestId, q.request_id));
      const { kept, next } = await listPage(c.env.DB, buildJobs, conditions, q.cursor, limit, { at: "createdAtMs" });
      return c.json({ jobs: kept.map(jobView), next_cursor: next });
    },
  )
  .get(
    "/build-jobs/:id",
    operation({
      id: "getBuildJob",
      summary: "Read a build job with its run's live state and its ledger entries",
      tag: TAG,
      auth: "member",
      responses: { 200: { description: "The job.", schema: BuildJob } },
      errors: ["not_found"],
    }),
    validate("param", BuildJobPath),
    async (c) => {
      const job = await loadJob(c.env.DB, c.get("caller").orgId, c.req.valid("param").id);
      return c.json(await jobAnswer(c.env, job));
    },
  )
  .get(
    "/build-jobs/:id/artifact",
    operation({
      id: "getBuildArtifact",
      summary: "Read the artifact of a build job's run",
      tag: TAG,
      auth: "member",
      responses: { 200: { description: "The artifact, with notes on what is empty or incomplete.", schema: BuildArtifact } },
      errors: ["not_found"],
    }),
    validate("param", BuildJobPath),
    async (c) => {
      const orgId = c.get("caller").orgId;
      const job = await loadJob(c.env.DB, orgId, c.req.valid("param").id);
      if (!job.runId) throw new DocketError("not_found", `job ${job.id} has no run yet, so no artifact`);
      const run = await runEngine.read(c.env, orgId, job.runId);
      if (!run || !run.artifact) throw new DocketError("not_found", `job ${job.id} has no artifact${run && run.ended_at_ms === null ? " yet" : ""}`);
      return c.json(artifactView(job.id, job.outcome, run));
    },
  )
  .post(
    "/build-jobs/:id/reconcile",
    operation({
      id: "reconcileBuildJob",
      summary: "Reconcile a build job with what the run engine knows (admin)",
      description:
        "An unconfirmed dispatch is confirmed when its run exists; otherwise `dispatch` (default) retries the creation under the job id and " +
        "`release` releases the whole reservation once no attempt was made within BUILD_DISPATCH_TIMEOUT_MS. A queued job whose run ended is " +
        "settled from the run's stored outcome (docs/protocol.md, \"Cost review and reconciliation\").",
      tag: TAG,
      auth: "admin",
      responses: {
        200: { description: "What reconciliation did, and the job.", schema: ReconciledBuildJob },
        202: { description: "The dispatch is still unconfirmed; the reservation stays held.", schema: ReconciledBuildJob },
      },
      errors: ["not_found", "dispatch_in_flight", "idempotency_conflict"],
    }),
    validate("param", BuildJobPath),
    validate("json", ReconcileBuildJobBody),
    async (c) => {
      const caller = c.get("caller");
      const job = await loadJob(c.env.DB, caller.orgId, c.req.valid("param").id);
      const result = await reconcileJob(c.env, c.get("config"), job, { action: c.req.valid("json").action ?? "dispatch", actor: `member:${caller.tokenId}` });
      return c.json({ outcome: result.outcome, message: result.message, job: await jobAnswer(c.env, result.job) }, result.outcome === "unconfirmed" ? 202 : 200);
    },
  )
  .post(
    "/build-jobs/:id/resolve",
    operation({
      id: "resolveBuildJob",
      summary: "Resolve a job held for cost review or reconciliation with its reconciled cost (admin)",
      description:
        "Within the reservation the cost is settled and the rest released; a cost above it is charged to available credit, which must cover it.",
      tag: TAG,
      auth: "admin",
      responses: { 200: { description: "The job, settled.", schema: BuildJob } },
      errors: ["not_found", "job_not_held", "insufficient_credit"],
    }),
    validate("param", BuildJobPath),
    validate("json", ResolveBuildJobBody),
    resolveHandler(async (env, orgId, path: { id: string }, input) => jobAnswer(env, await resolveJob(env, await loadJob(env.DB, orgId, path.id), input))),
  )
  // The exact completion callback URL of a job: unauthenticated, because it is a capability that
  // only triggers settlement from the run object's own record; its body is never trusted.
  .post(
    "/build-callbacks/:token",
    operation({
      id: "receiveBuildCallback",
      summary: "A build job's completion callback",
      description:
        "The exact URL in the job's dispatch payload; the URL is the capability and the body is ignored. The job is settled from its run's own record, at most once.",
      tag: TAG,
      auth: "none",
      responses: { 200: { description: "The job's id and status.", schema: BuildCallbackAnswer } },
      errors: ["not_found"],
    }),
    validate("param", BuildCallbackPath),
    async (c) => {
      const job = await completeByCallback(c.env, c.req.valid("param").token);
      return c.json({ job_id: job.id, status: job.status } as BuildCallbackAnswer);
    },
  );
