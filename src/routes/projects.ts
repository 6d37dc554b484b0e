// Projects and their build requests: the saved project, the license, the owner's source plan and
// the paid dispatch of a build (../shared/spec/build-lifecycle.md, "From request to reserved job").

import { and, desc, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { Hono, type HonoRequest, type MiddlewareHandler } from "hono";
import { resolver, uniqueSymbol } from "hono-openapi";
import type { AppEnv, Caller } from "../app-types";
import { dispatchBuild } from "../builds/dispatcher";
import { findHeldJob } from "../builds/preconditions";
import { jobView, projectView, requestView, type RequestRow } from "../builds/payload";
import { PLAN_EDITABLE_LABELS } from "../builds/states";
import { loadProject, loadRequest, savePlan } from "../builds/store";
import { buildJobs, buildRequests, projects } from "../db/ledger-schema";
import { DocketError } from "../errors";
import { newId } from "../lib/crypto";
import { log } from "../lib/log";
import { normalizeLabels } from "../run/labels";
import { launchSpec } from "../run/launch";
import { checkProject } from "../bounds";
import { operation } from "../openapi/operation";
import {
  AcceptLicenseBody,
  BuildPlanBody,
  BuildRequest,
  BuildRequestPage,
  BuildRequestPath,
  buildJobId,
  CreateBuildRequestBody,
  CreateProjectBody,
  DispatchBuildBody,
  DispatchedBuildJob,
  ListBuildRequestsQuery,
  ListProjectsQuery,
  Project,
  ProjectPage,
  ProjectPath,
} from "../protocol/builds";
import { idempotencyKeyOf, invalid, refuseBodyThatIsNotJson, validate } from "../validate";
import { listPage, pageSize } from "../lib/pagination";
import { jobAnswer } from "./job-answer";

const TAG = "Projects and builds";

/** A build request as every answer about one request shows it: with its latest jobs. */
async function requestAnswer(db: D1Database, request: RequestRow): Promise<BuildRequest> {
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

const IDEMPOTENCY_KEY_OF_JOB = {
  name: "Idempotency-Key",
  description:
    "The job's id (1-128 of A-Z a-z 0-9 . _ : -, starting with a letter or digit); Docket makes job_… without it. " +
    "The same key with the same request, plan and body answers the job again; with another, 409 idempotency_conflict (docs/protocol.md, \"Idempotency\").",
};

/**
 * Shows the dispatch's optional body in the document (the contract's validator would make a body
 * required); the handler checks it, after the Idempotency-Key (optionalEmptyBody).
 */
const dispatchBody: MiddlewareHandler<AppEnv> = Object.assign((_c: unknown, next: () => Promise<void>) => next(), {
  [uniqueSymbol]: { spec: { requestBody: { required: false, content: { "application/json": { schema: resolver(DispatchBuildBody) } } } } },
});

export const projectRoutes = new Hono<AppEnv>()
  .post(
    "/projects",
    operation({
      id: "createProject",
      summary: "Create a project",
      description: "A GitHub repository, what the runner starts for its builds and the runner labels a build needs. Environment names starting DOCKET_ are Docket's.",
      tag: TAG,
      auth: "member",
      responses: { 201: { description: "The project, without a license yet.", schema: Project } },
    }),
    validate("json", CreateProjectBody, checkProject),
    async (c) => {
      const body = c.req.valid("json");
      const caller = c.get("caller");
      const nowMs = Date.now();
      const row = {
        id: newId("prj"),
        orgId: caller.orgId,
        name: body.name,
        sourceUrl: body.source_url,
        launch: JSON.stringify(launchSpec(body.launch)),
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
    },
  )
  .get(
    "/projects",
    operation({
      id: "listProjects",
      summary: "List the organization's projects",
      tag: TAG,
      auth: "member",
      responses: { 200: { description: "A page of projects, newest first.", schema: ProjectPage } },
    }),
    validate("query", ListProjectsQuery),
    async (c) => {
      const q = c.req.valid("query");
      const limit = pageSize(q.limit, 50, c.get("config").pageSizeMax);
      const { kept, next } = await listPage(c.env.DB, projects, [eq(projects.orgId, c.get("caller").orgId)], q.cursor, limit, { at: "createdAtMs" });
      return c.json({ projects: kept.map(projectView), next_cursor: next });
    },
  )
  .get(
    "/projects/:id",
    operation({
      id: "getProject",
      summary: "Read a project",
      tag: TAG,
      auth: "member",
      responses: { 200: { description: "The project.", schema: Project } },
      errors: ["not_found"],
    }),
    validate("param", ProjectPath),
    async (c) => {
      return c.json(projectView(await loadProject(c.env.DB, c.get("caller").orgId, c.req.valid("param").id)));
    },
  )
  .post(
    "/projects/:id/license",
    operation({
      id: "setProjectLicense",
      summary: "Accept the project's license",
      description: "The project's creator or an admin. A build needs an accepted license; accepting again replaces it.",
      tag: TAG,
      auth: "member",
      responses: { 200: { description: "The project with its license.", schema: Project } },
      errors: ["not_found", "forbidden"],
    }),
    validate("param", ProjectPath),
    validate("json", AcceptLicenseBody),
    async (c) => {
      const caller = c.get("caller");
      const project = await loadProject(c.env.DB, caller.orgId, c.req.valid("param").id);
      requireOwner(caller, project.createdBy, "project");
      const nowMs = Date.now();
      await drizzle(c.env.DB)
        .update(projects)
        .set({ licenseName: c.req.valid("json").license, licenseAcceptedAtMs: nowMs, licenseAcceptedBy: caller.tokenId, updatedAtMs: nowMs })
        .where(and(eq(projects.orgId, caller.orgId), eq(projects.id, project.id)));
      return c.json(projectView(await loadProject(c.env.DB, caller.orgId, project.id)));
    },
  )
  .post(
    "/projects/:id/requests",
    operation({
      id: "createBuildRequest",
      summary: "Create a build request of a project",
      tag: TAG,
      auth: "member",
      responses: { 201: { description: "The request, labelled requested, with no jobs.", schema: BuildRequest } },
      errors: ["not_found"],
    }),
    validate("param", ProjectPath),
    validate("json", CreateBuildRequestBody),
    async (c) => {
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
    },
  )
  .get(
    "/build-requests",
    operation({
      id: "listBuildRequests",
      summary: "List build requests",
      description: "Optionally of one project or with one label. A listed request has no jobs: read it for them.",
      tag: TAG,
      auth: "member",
      responses: { 200: { description: "A page of build requests, newest first.", schema: BuildRequestPage } },
    }),
    validate("query", ListBuildRequestsQuery),
    async (c) => {
      const q = c.req.valid("query");
      const limit = pageSize(q.limit, 50, c.get("config").pageSizeMax);
      const conditions = [eq(buildRequests.orgId, c.get("caller").orgId)];
      if (q.project_id) conditions.push(eq(buildRequests.projectId, q.project_id));
      if (q.label) conditions.push(eq(buildRequests.label, q.label));
      const { kept, next } = await listPage(c.env.DB, buildRequests, conditions, q.cursor, limit, { at: "createdAtMs" });
      return c.json({ requests: kept.map(requestView), next_cursor: next });
    },
  )
  .get(
    "/build-requests/:id",
    operation({
      id: "getBuildRequest",
      summary: "Read a build request with its latest jobs",
      tag: TAG,
      auth: "member",
      responses: { 200: { description: "The request with its latest 20 jobs.", schema: BuildRequest } },
      errors: ["not_found"],
    }),
    validate("param", BuildRequestPath),
    async (c) => {
      const request = await loadRequest(c.env.DB, c.get("caller").orgId, c.req.valid("param").id);
      return c.json(await requestAnswer(c.env.DB, request));
    },
  )
  .put(
    "/build-requests/:id/plan",
    operation({
      id: "setBuildPlan",
      summary: "Save a build request's source plan",
      description: "The request's creator or an admin. Moves the request to source_review; refused while a job of the request holds a reservation.",
      tag: TAG,
      auth: "member",
      responses: { 200: { description: "The request with its jobs, labelled source_review.", schema: BuildRequest } },
      errors: ["not_found", "forbidden", "request_locked"],
    }),
    validate("param", BuildRequestPath),
    validate("json", BuildPlanBody),
    async (c) => {
      const caller = c.get("caller");
      const request = await loadRequest(c.env.DB, caller.orgId, c.req.valid("param").id);
      requireOwner(caller, request.createdBy, "build request");
      const plan = c.req.valid("json");
      const saved = await savePlan(c.env.DB, request, { pinnedCommit: plan.pinned_commit, migrationPlan: plan.migration_plan, chainTarget: plan.chain_target }, caller.tokenId);
      const after = await loadRequest(c.env.DB, caller.orgId, request.id);
      if (!saved) {
        const held = PLAN_EDITABLE_LABELS.includes(after.label as never) ? await findHeldJob(c.env, after) : undefined;
        const why = held ? `while its job ${held.id} is ${held.status} and holds credit` : `once the request is labelled ${after.label}`;
        throw new DocketError("request_locked", `the plan cannot change ${why}`, { label: after.label });
      }
      log("build.plan_saved", { org: caller.orgId, request: request.id, by: caller.tokenId, reason: "a member saved the plan" });
      return c.json(await requestAnswer(c.env.DB, after));
    },
  )
  .post(
    "/build-requests/:id/dispatch",
    operation({
      id: "dispatchBuildRequest",
      summary: "Dispatch a build: reserve credit and create the job's run",
      description:
        "The body is empty or {}. The checks, in order: a saved plan, an accepted license, no held job for the request, a connected runner " +
        "that can serve the project, and the minimum available credit. Then credit is reserved and the job made in one statement, and the run " +
        "is created under the job id (docs/protocol.md, \"Dispatch\").",
      tag: TAG,
      auth: "member",
      responses: {
        201: { description: "A new job, queued, with its run.", schema: DispatchedBuildJob },
        200: { description: "The same job id and payload again: the job as it is now; nothing is scheduled twice.", schema: DispatchedBuildJob },
        202: { description: "The run's creation could not be confirmed: the reservation stays held and the job will be reconciled.", schema: DispatchedBuildJob },
      },
      errors: ["not_found", "plan_required", "license_required", "job_already_queued", "cost_review_pending", "no_connected_runner", "insufficient_credit", "idempotency_conflict"],
      headers: [IDEMPOTENCY_KEY_OF_JOB],
    }),
    validate("param", BuildRequestPath),
    dispatchBody,
    async (c) => {
      // The key is the job's id, so it follows the job id's narrower rule (docs/protocol.md, "Idempotency").
      const jobId = idempotencyKeyOf(c.req, buildJobId) ?? newId("job");
      const body = await optionalEmptyBody(c.req);
      const caller = c.get("caller");
      const result = await dispatchBuild(c.env, c.get("config"), {
        orgId: caller.orgId,
        requestId: c.req.valid("param").id,
        jobId,
        body,
        tokenId: caller.tokenId,
        origin: new URL(c.req.url).origin,
      });
      return c.json({ ...(await jobAnswer(c.env, result.job)), message: result.message }, result.status);
    },
  );

/** The dispatch's body: optional, and when present an empty JSON object (DispatchBuildBody). */
async function optionalEmptyBody(req: HonoRequest): Promise<DispatchBuildBody> {
  await refuseBodyThatIsNotJson(req);
  const text = await req.text();
  let body: unknown = {};
  if (text.trim() !== "") {
    try {
      body = JSON.parse(text);
    } catch {
      throw new DocketError("invalid_request", "body: must be JSON", { field: "body" });
    }
  }
  const parsed = DispatchBuildBody.safeParse(body);
  if (!parsed.success) throw invalid(parsed.error.issues, "body");
  return parsed.data;
}
