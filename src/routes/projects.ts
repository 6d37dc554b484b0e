// Projects and their build requests: the saved project, the license, the owner's source plan and
// the paid dispatch of a build (../shared/spec/build-lifecycle.md, "From request to reserved job").

import { and, desc, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv, Caller } from "../app-types";
import { requireMember } from "../auth";
import { dispatchBuild } from "../builds/dispatcher";
import { BUILD_ENV_PREFIX, jobView, projectView, requestView, type RequestRow } from "../builds/payload";
import { PLAN_EDITABLE_LABELS, REQUEST_LABELS } from "../builds/states";
import { loadProject, loadRequest } from "../builds/store";
import { buildJobs, buildRequests, projects } from "../db/ledger-schema";
import { DocketError } from "../errors";
import { newId } from "../lib/crypto";
import { log } from "../lib/log";
import { normalizeLabels } from "../run/labels";
import { checkProject } from "../bounds";
import { BOUND_CEILINGS } from "../protocol/bounds";
import { atMostKeys, idempotencyKeyOf, refuseBodyThatIsNotJson, validate } from "../validate";
import { labelList } from "../protocol/common";
import { afterCursor, keysetCursor, pageOf, pageQuery, pageSize } from "../lib/pagination";
import { jobAnswer } from "./job-answer";

export const projectIdParam = z.string().regex(/^prj_[0-9a-f]{24}$/, "must be a project id like prj_<24 hex digits>");
export const requestIdParam = z.string().regex(/^req_[0-9a-f]{24}$/, "must be a build request id like req_<24 hex digits>");
/** A job id is chosen by the caller as the dispatch's Idempotency-Key (or made by Docket). */
export const jobIdSchema = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/, "must be 1-128 letters, digits and . _ : - (starting with a letter or digit)");

const githubUrl = z
  .string()
  .max(2_000)
  .regex(/^https:\/\/github\.com\/[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+?(\.git)?\/?$/, "must be a GitHub repository URL like https://github.com/owner/repo");

const createProject = z
  .object({
    name: z.string().trim().min(1).max(200),
    source_url: githubUrl,
    labels: labelList.optional(),
    launch: z
      .object({
        protocol: z.string().min(1).max(32).optional(),
        command: z.array(z.string().min(1).max(4_000)).min(1).max(64),
        image: z.string().min(1).max(500).nullable().optional(),
        env: z
          .record(
            z
              .string()
              .regex(/^[A-Za-z_][A-Za-z0-9_]*$/)
              .refine((k) => !k.startsWith(BUILD_ENV_PREFIX), `names starting ${BUILD_ENV_PREFIX} are set by Docket`),
            z.string().max(10_000),
          )
          .refine(atMostKeys(BOUND_CEILINGS.launchEnvMaxKeys), "too many keys")
          .optional(),
      })
      .strict(),
  })
  .strict();

const licenseBody = z.object({ license: z.string().trim().min(1).max(200), accepted: z.literal(true) }).strict();

const createRequest = z.object({ title: z.string().trim().min(1).max(500) }).strict();

/** The source plan (build-lifecycle.md): pinned commit, migration plan and chain target. */
const planBody = z
  .object({
    pinned_commit: z.string().regex(/^[0-9a-f]{40}([0-9a-f]{24})?$/, "must be a full commit hash (40 or 64 hex digits)"),
    migration_plan: z.string().min(1).max(20_000),
    chain_target: z.string().min(1).max(100).regex(/^[A-Za-z0-9._:-]+$/, "must be letters, digits and . _ : -"),
  })
  .strict();

const dispatchBody = z.object({}).strict();

const listQuery = z.object(pageQuery(keysetCursor("prj_[0-9a-f]{24}"))).strict();

const requestListQuery = z.object(pageQuery(keysetCursor("req_[0-9a-f]{24}"))).extend({ project_id: projectIdParam.optional(), label: z.enum(REQUEST_LABELS).optional() }).strict();

/** A build request as every answer about one request shows it: with its latest jobs. */
async function requestAnswer(db: D1Database, request: RequestRow) {
  const jobs = await drizzle(db)
    .select()
    .from(buildJobs)
    .where(and(eq(buildJobs.orgId, request.orgId), eq(buildJobs.requestId, request.id)))
    .orderBy(desc(buildJobs.createdAtMs))
    .limit(20);
  return { ...requestView(request), jobs: jobs.map(jobView) };
}

/** The creator of a project or request, or an admin. */
function requireOwner(caller: Caller, createdBy: string, what: string): void {
  if (caller.role !== "admin" && caller.tokenId !== createdBy) {
    throw new DocketError("forbidden", `only the ${what}'s owner or an admin may do this`);
  }
}

export const projectRoutes = new Hono<AppEnv>()
  .post("/projects", requireMember, validate("json", createProject, checkProject), async (c) => {
    const body = c.req.valid("json");
    const caller = c.get("caller");
    const nowMs = Date.now();
    const row = {
      id: newId("prj"),
      orgId: caller.orgId,
      name: body.name,
      sourceUrl: body.source_url,
      launch: JSON.stringify({ protocol: body.launch.protocol ?? "process", command: body.launch.command, image: body.launch.image ?? null, env: body.launch.env ?? {} }),
      labels: JSON.stringify(normalizeLabels(body.labels ?? [])),
      licenseName: null,
      licenseAcceptedAtMs: null,
      licenseAcceptedBy: null,
      createdBy: caller.tokenId,
      createdAtMs: nowMs,
      updatedAtMs: nowMs,
    };
    await drizzle(c.env.DB).insert(projects).values(row);
    return c.json(projectView(row), 201);
  })
  .get("/projects", requireMember, validate("query", listQuery), async (c) => {
    const q = c.req.valid("query");
    const limit = pageSize(q.limit, 50, c.get("config").pageSizeMax);
    const conditions = [eq(projects.orgId, c.get("caller").orgId)];
    if (q.cursor) conditions.push(afterCursor(projects.createdAtMs, projects.id, q.cursor));
    const rows = await drizzle(c.env.DB).select().from(projects).where(and(...conditions)).orderBy(desc(projects.createdAtMs), desc(projects.id)).limit(limit + 1);
    const { kept, next } = pageOf(rows, limit);
    return c.json({ projects: kept.map(projectView), next_cursor: next });
  })
  .get("/projects/:id", requireMember, validate("param", z.object({ id: projectIdParam })), async (c) => {
    return c.json(projectView(await loadProject(c.env.DB, c.get("caller").orgId, c.req.valid("param").id)));
  })
  .post("/projects/:id/license", requireMember, validate("param", z.object({ id: projectIdParam })), validate("json", licenseBody), async (c) => {
    const caller = c.get("caller");
    const project = await loadProject(c.env.DB, caller.orgId, c.req.valid("param").id);
    requireOwner(caller, project.createdBy, "project");
    const nowMs = Date.now();
    await drizzle(c.env.DB)
      .update(projects)
      .set({ licenseName: c.req.valid("json").license, licenseAcceptedAtMs: nowMs, licenseAcceptedBy: caller.tokenId, updatedAtMs: nowMs })
      .where(and(eq(projects.orgId, caller.orgId), eq(projects.id, project.id)));
    return c.json(projectView(await loadProject(c.env.DB, caller.orgId, project.id)));
  })
  .post("/projects/:id/requests", requireMember, validate("param", z.object({ id: projectIdParam })), validate("json", createRequest), async (c) => {
    const caller = c.get("caller");
    const project = await loadProject(c.env.DB, caller.orgId, c.req.valid("param").id);
    const nowMs = Date.now();
    // A new request begins as Requested (build-lifecycle.md, "From request to reserved job").
    const row = {
      id: newId("req"),
      orgId: caller.orgId,
      projectId: project.id,
      title: c.req.valid("json").title,
      label: "requested",
      pinnedCommit: null,
      migrationPlan: null,
      chainTarget: null,
      planSavedAtMs: null,
      planSavedBy: null,
      createdBy: caller.tokenId,
      createdAtMs: nowMs,
      updatedAtMs: nowMs,
    };
    await drizzle(c.env.DB).insert(buildRequests).values(row);
    return c.json({ ...requestView(row), jobs: [] }, 201);
  })
  .get("/build-requests", requireMember, validate("query", requestListQuery), async (c) => {
    const q = c.req.valid("query");
    const limit = pageSize(q.limit, 50, c.get("config").pageSizeMax);
    const conditions = [eq(buildRequests.orgId, c.get("caller").orgId)];
    if (q.project_id) conditions.push(eq(buildRequests.projectId, q.project_id));
    if (q.label) conditions.push(eq(buildRequests.label, q.label));
    if (q.cursor) conditions.push(afterCursor(buildRequests.createdAtMs, buildRequests.id, q.cursor));
    const rows = await drizzle(c.env.DB)
      .select()
      .from(buildRequests)
      .where(and(...conditions))
      .orderBy(desc(buildRequests.createdAtMs), desc(buildRequests.id))
      .limit(limit + 1);
    const { kept, next } = pageOf(rows, limit);
    return c.json({ requests: kept.map(requestView), next_cursor: next });
  })
  .get("/build-requests/:id", requireMember, validate("param", z.object({ id: requestIdParam })), async (c) => {
    const request = await loadRequest(c.env.DB, c.get("caller").orgId, c.req.valid("param").id);
    return c.json(await requestAnswer(c.env.DB, request));
  })
  .put("/build-requests/:id/plan", requireMember, validate("param", z.object({ id: requestIdParam })), validate("json", planBody), async (c) => {
    const caller = c.get("caller");
    const request = await loadRequest(c.env.DB, caller.orgId, c.req.valid("param").id);
    requireOwner(caller, request.createdBy, "build request");
    const plan = c.req.valid("json");
    const nowMs = Date.now();
    // Saving the plan moves the request to Source review; never while a job holds a reservation,
    // so a job always runs the plan it reserved for.
    const saved = await c.env.DB.prepare(
      `UPDATE build_requests SET pinned_commit = ?, migration_plan = ?, chain_target = ?, plan_saved_at_ms = ?, plan_saved_by = ?,
         label = 'source_review', updated_at_ms = ?
       WHERE org_id = ? AND id = ? AND label IN (${PLAN_EDITABLE_LABELS.map(() => "?").join(", ")})
         AND NOT EXISTS (SELECT 1 FROM build_jobs WHERE org_id = ? AND request_id = ?
                         AND status IN ('dispatch_unconfirmed', 'queued', 'cost_review', 'reconcile'))`,
    )
      .bind(plan.pinned_commit, plan.migration_plan, plan.chain_target, nowMs, caller.tokenId, nowMs, caller.orgId, request.id, ...PLAN_EDITABLE_LABELS, caller.orgId, request.id)
      .run();
    const after = await loadRequest(c.env.DB, caller.orgId, request.id);
    if (saved.meta.changes !== 1) {
      throw new DocketError("request_locked", `the plan of a request labelled ${after.label} or with a held job cannot change`, { label: after.label });
    }
    log("build.plan_saved", { org: caller.orgId, request: request.id, by: caller.tokenId, reason: "a member saved the plan" });
    return c.json(await requestAnswer(c.env.DB, after));
  })
  .post("/build-requests/:id/dispatch", requireMember, validate("param", z.object({ id: requestIdParam })), async (c) => {
    // The key is the job's id, so it follows the job id's narrower rule (docs/protocol.md, "Idempotency").
    const jobId = idempotencyKeyOf(c.req, jobIdSchema) ?? newId("job");
    // The body is optional; when present it must be an empty JSON object.
    await refuseBodyThatIsNotJson(c.req);
    const text = await c.req.text();
    let body: unknown = {};
    if (text.trim() !== "") {
      try {
        body = JSON.parse(text);
      } catch {
        throw new DocketError("invalid_request", "body: must be JSON", { field: "body" });
      }
    }
    const parsedBody = dispatchBody.safeParse(body);
    if (!parsedBody.success) {
      throw new DocketError("invalid_request", `body ${parsedBody.error.issues[0].path.join(".") || "body"}: ${parsedBody.error.issues[0].message}`, {
        field: parsedBody.error.issues[0].path.join(".") || "body",
      });
    }
    const caller = c.get("caller");
    const result = await dispatchBuild(c.env, c.get("config"), {
      orgId: caller.orgId,
      requestId: c.req.valid("param").id,
      jobId,
      body: parsedBody.data,
      tokenId: caller.tokenId,
      origin: new URL(c.req.url).origin,
    });
    return c.json({ ...(await jobAnswer(c.env, result.job)), message: result.message }, result.status);
  });
