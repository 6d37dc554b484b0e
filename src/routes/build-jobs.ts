// Build jobs: find one by id, its artifact, reconciliation and cost review (admin), and the
// completion callback (../shared/spec/build-lifecycle.md, "Completion means an artifact is ready for
// review" and "Recover without duplicating spend"; docs/runbook.md).

import { and, desc, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../app-types";
import { requireAdmin, requireMember } from "../auth";
import { completeByCallback, reconcileJob } from "../builds/reconcile";
import { jobView } from "../builds/payload";
import { runEngine } from "../builds/run-engine";
import { resolveJob } from "../builds/settle";
import { JOB_STATUSES } from "../builds/states";
import { loadJob } from "../builds/store";
import { buildJobs } from "../db/ledger-schema";
import { DocketError } from "../errors";
import type { RunView } from "../run/view";
import { validate } from "../validate";
import { jobIdSchema, requestIdParam } from "./projects";
import { afterCursor, keysetCursor, pageOf, pageQuery, pageSize } from "../lib/pagination";
import { jobAnswer } from "./job-answer";

const jobParam = z.object({ id: jobIdSchema });

const listQuery = z
  .object({
    status: z.enum(JOB_STATUSES).optional(),
    request_id: requestIdParam.optional(),
    ...pageQuery(keysetCursor("[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")),
  })
  .strict();

const reconcileBody = z.object({ action: z.enum(["dispatch", "release"]).optional() }).strict();

const resolveBody = z
  .object({
    cost_cents: z.number().int().min(0).max(100_000_000),
    note: z.string().trim().min(1).max(1_000),
  })
  .strict();

const callbackParam = z.object({ token: z.string().regex(/^cb_[0-9a-f]{48}$/, "must be a completion callback token") });

/** The artifact as a reviewer sees it: an empty or incomplete patch is said to be one. */
function artifactView(jobId: string, outcome: string | null, run: RunView) {
  const a = run.artifact!;
  const failedCommands = Object.entries(a.exit_codes).filter(([, code]) => code !== 0);
  const notes: string[] = [];
  if (a.empty) notes.push("the patch is empty: the run returned no changes");
  if (run.state !== "completed") notes.push(`the run ended ${run.state}: the patch may be incomplete`);
  for (const [name, code] of failedCommands) notes.push(`command ${name} exited with ${code}`);
  return {
    job_id: jobId,
    run_id: run.id,
    outcome,
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
  .get("/build-jobs", requireMember, validate("query", listQuery), async (c) => {
    const q = c.req.valid("query");
    const limit = pageSize(q.limit, 50, c.get("config").pageSizeMax);
    const conditions = [eq(buildJobs.orgId, c.get("caller").orgId)];
    if (q.status) conditions.push(eq(buildJobs.status, q.status));
    if (q.request_id) conditions.push(eq(buildJobs.requestId, q.request_id));
    if (q.cursor) conditions.push(afterCursor(buildJobs.createdAtMs, buildJobs.id, q.cursor));
    const rows = await drizzle(c.env.DB)
      .select()
      .from(buildJobs)
      .where(and(...conditions))
      .orderBy(desc(buildJobs.createdAtMs), desc(buildJobs.id))
      .limit(limit + 1);
    const { kept, next } = pageOf(rows, limit);
    return c.json({ jobs: kept.map(jobView), next_cursor: next });
  })
  .get("/build-jobs/:id", requireMember, validate("param", jobParam), async (c) => {
    const job = await loadJob(c.env.DB, c.get("caller").orgId, c.req.valid("param").id);
    return c.json(await jobAnswer(c.env, job));
  })
  .get("/build-jobs/:id/artifact", requireMember, validate("param", jobParam), async (c) => {
    const orgId = c.get("caller").orgId;
    const job = await loadJob(c.env.DB, orgId, c.req.valid("param").id);
    if (!job.runId) throw new DocketError("not_found", `job ${job.id} has no run yet, so no artifact`);
    const run = await runEngine.read(c.env, orgId, job.runId);
    if (!run || !run.artifact) throw new DocketError("not_found", `job ${job.id} has no artifact${run && run.ended_at_ms === null ? " yet" : ""}`);
    return c.json(artifactView(job.id, job.outcome, run));
  })
  .post("/build-jobs/:id/reconcile", requireMember, requireAdmin, validate("param", jobParam), validate("json", reconcileBody), async (c) => {
    const caller = c.get("caller");
    const job = await loadJob(c.env.DB, caller.orgId, c.req.valid("param").id);
    const result = await reconcileJob(c.env, c.get("config"), job, { action: c.req.valid("json").action ?? "dispatch", actor: `member:${caller.tokenId}` });
    return c.json({ outcome: result.outcome, message: result.message, job: await jobAnswer(c.env, result.job) }, result.outcome === "unconfirmed" ? 202 : 200);
  })
  .post("/build-jobs/:id/resolve", requireMember, requireAdmin, validate("param", jobParam), validate("json", resolveBody), async (c) => {
    const caller = c.get("caller");
    const body = c.req.valid("json");
    const job = await loadJob(c.env.DB, caller.orgId, c.req.valid("param").id);
    const after = await resolveJob(c.env, job, { costCents: body.cost_cents, note: body.note, actor: `member:${caller.tokenId}` });
    return c.json(await jobAnswer(c.env, after));
  })
  // The exact completion callback URL of a job: unauthenticated, because it is a capability that
  // only triggers settlement from the run object's own record; its body is never trusted.
  .post("/build-callbacks/:token", validate("param", callbackParam), async (c) => {
    const job = await completeByCallback(c.env, c.req.valid("param").token);
    return c.json({ job_id: job.id, status: job.status });
  });
