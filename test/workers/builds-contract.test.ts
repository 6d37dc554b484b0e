// The contract of projects, build requests and build jobs (src/protocol/builds.ts): every build route
// is in the OpenAPI document with its answers, refusals and the dispatch's Idempotency-Key, the
// answers decode with the contract's schemas field for field, and listPage pages by the time it is
// asked to.

import { env } from "cloudflare:workers";
import { drizzle } from "drizzle-orm/d1";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { projects } from "../../src/db/ledger-schema";
import { listPage } from "../../src/lib/pagination";
import { BuildJob, BuildRequest, BuildRequestPage, BuildJobPage, DispatchedBuildJob, Project, ProjectPage } from "../../src/protocol/builds";
import { dispatchBuild, readyToBuild } from "./builds-helpers";
import { callDirect } from "./direct";
import { call } from "./helpers";

type Json = Record<string, any>;

/** Each build route: its operation id, and the statuses and codes it must list. */
const BUILD_OPERATIONS: { method: string; path: string; id: string; success: string[]; codes?: string[] }[] = [
  { method: "post", path: "/v1/projects", id: "createProject", success: ["201"] },
  { method: "get", path: "/v1/projects", id: "listProjects", success: ["200"] },
  { method: "get", path: "/v1/projects/{id}", id: "getProject", success: ["200"], codes: ["not_found"] },
  { method: "post", path: "/v1/projects/{id}/license", id: "setProjectLicense", success: ["200"], codes: ["not_found", "forbidden"] },
  { method: "post", path: "/v1/projects/{id}/requests", id: "createBuildRequest", success: ["201"], codes: ["not_found"] },
  { method: "get", path: "/v1/build-requests", id: "listBuildRequests", success: ["200"] },
  { method: "get", path: "/v1/build-requests/{id}", id: "getBuildRequest", success: ["200"], codes: ["not_found"] },
  { method: "put", path: "/v1/build-requests/{id}/plan", id: "setBuildPlan", success: ["200"], codes: ["not_found", "forbidden", "request_locked"] },
  {
    method: "post",
    path: "/v1/build-requests/{id}/dispatch",
    id: "dispatchBuildRequest",
    success: ["200", "201", "202"],
    codes: ["not_found", "plan_required", "license_required", "job_already_queued", "cost_review_pending", "no_connected_runner", "insufficient_credit", "idempotency_conflict"],
  },
  { method: "get", path: "/v1/build-jobs", id: "listBuildJobs", success: ["200"] },
  { method: "get", path: "/v1/build-jobs/{id}", id: "getBuildJob", success: ["200"], codes: ["not_found"] },
  { method: "get", path: "/v1/build-jobs/{id}/artifact", id: "getBuildArtifact", success: ["200"], codes: ["not_found"] },
  { method: "post", path: "/v1/build-jobs/{id}/reconcile", id: "reconcileBuildJob", success: ["200", "202"], codes: ["not_found", "forbidden", "dispatch_in_flight", "idempotency_conflict"] },
  { method: "post", path: "/v1/build-jobs/{id}/resolve", id: "resolveBuildJob", success: ["200"], codes: ["not_found", "forbidden", "job_not_held", "insufficient_credit"] },
  { method: "post", path: "/v1/build-callbacks/{token}", id: "receiveBuildCallback", success: ["200"], codes: ["not_found"] },
];

function codesOf(op: Json): string[] {
  return Object.entries<Json>(op.responses)
    .filter(([status]) => Number(status) >= 400)
    .flatMap(([, answer]) => answer.content["application/json"].schema.properties.error.properties.code.enum as string[]);
}

/** The answer's fields are exactly the schema's, at the top and in every nested object the schema names. */
function expectExactly(schema: z.ZodType, value: unknown, where: string) {
  const parsed = schema.safeParse(value);
  expect(parsed.success, `${where}: ${parsed.success ? "" : JSON.stringify(parsed.error.issues[0])}`).toBe(true);
  const shape = (schema as unknown as { shape?: Record<string, z.ZodType> }).shape;
  if (!shape || value === null || typeof value !== "object") return;
  expect(Object.keys(value).sort(), where).toEqual(Object.keys(shape).sort());
}

describe("the OpenAPI document describes every build route", () => {
  it("with its operation id, tag, success statuses and every refusal the route can give", async () => {
    const doc = (await callDirect("GET", "/v1/openapi.json")).body;
    for (const want of BUILD_OPERATIONS) {
      const op = doc.paths[want.path]?.[want.method];
      const where = `${want.method.toUpperCase()} ${want.path}`;
      expect(op, `${where} is not in the document`).toBeTruthy();
      expect(op.operationId, where).toBe(want.id);
      expect(op.tags, where).toEqual(["Projects and builds"]);
      expect(Object.keys(op.responses).filter((s) => s.startsWith("2")).sort(), where).toEqual(want.success);
      const codes = codesOf(op);
      for (const code of ["invalid_request", ...(want.codes ?? [])]) expect(codes, where).toContain(code);
    }
    // The callback URL is the capability; every other build route needs a member token.
    expect(doc.paths["/v1/build-callbacks/{token}"].post.security).toEqual([]);
    expect(doc.paths["/v1/build-jobs/{id}"].get.security).toEqual([{ memberToken: [] }]);
  });

  it("documents the dispatch's Idempotency-Key as the job id, and the request bodies and queries", async () => {
    const doc = (await callDirect("GET", "/v1/openapi.json")).body;
    const dispatch = doc.paths["/v1/build-requests/{id}/dispatch"].post;
    const key = dispatch.parameters.find((p: Json) => p.in === "header" && p.name === "Idempotency-Key");
    expect(key?.description).toMatch(/job's id/);
    expect(dispatch.requestBody.required).toBe(false);
    expect(dispatch.requestBody.content["application/json"].schema).toMatchObject({ type: "object", additionalProperties: false });
    const plan = doc.paths["/v1/build-requests/{id}/plan"].put.requestBody.content["application/json"].schema;
    expect(JSON.stringify(plan)).toContain("pinned_commit");
    const list = doc.paths["/v1/build-jobs"].get.parameters.map((p: Json) => p.name).sort();
    expect(list).toEqual(["cursor", "limit", "request_id", "status"]);
  });
});

describe("build answers decode with the contract, field for field", () => {
  it("a project, a request and a job: created, read and listed", async () => {
    const { admin, projectId, requestId } = await readyToBuild({ name: "contract" });
    const project = await call("GET", `/v1/projects/${projectId}`, { token: admin });
    expectExactly(Project, project.body, "project");
    expectExactly(ProjectPage, (await call("GET", "/v1/projects", { token: admin })).body, "project page");
    const created = await call("POST", `/v1/projects/${projectId}/requests`, { token: admin, body: { title: "another" } });
    expect(created.status).toBe(201);
    expectExactly(BuildRequest, created.body, "created request");
    const dispatched = await dispatchBuild(admin, requestId, "contract-job");
    expect(dispatched.status).toBe(201);
    expectExactly(DispatchedBuildJob, dispatched.body, "dispatched job");
    expectExactly(BuildJob, (await call("GET", "/v1/build-jobs/contract-job", { token: admin })).body, "read job");
    expectExactly(BuildJobPage, (await call("GET", "/v1/build-jobs", { token: admin })).body, "job page");
    expectExactly(BuildRequestPage, (await call("GET", "/v1/build-requests", { token: admin })).body, "request page");
    const read = (await call("GET", `/v1/build-requests/${requestId}`, { token: admin })).body;
    expectExactly(BuildRequest, read, "read request");
    expect(read.jobs.map((j: Json) => j.id)).toEqual(["contract-job"]);
  });

  it("a dispatch with an unknown body field names it in one message", async () => {
    const { admin, requestId } = await readyToBuild({ name: "contract-body" });
    const res = await dispatchBuild(admin, requestId, "contract-bad", { usd: 5 });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: "invalid_request", field: "body" });
    expect(res.body.error.message).toMatch(/^body: .*usd/);
  });
});

describe("listPage", () => {
  it("pages newest first by the time it is given, ties by id, each row once", async () => {
    const orgId = "org_" + "c".repeat(24);
    const rows = [5, 3, 3, 9, 1].map((updatedAtMs, i) => ({
      id: `prj_${String(i).padStart(24, "0")}`,
      orgId,
      name: `p${i}`,
      sourceUrl: "https://github.com/acme/x",
      launch: "{}",
      labels: "[]",
      licenseName: null,
      licenseAcceptedAtMs: null,
      licenseAcceptedBy: null,
      createdBy: "tok_x",
      // Creation times run the other way, so a page ordered by them would differ.
      createdAtMs: 100 - i,
      updatedAtMs,
    }));
    await drizzle(env.DB).insert(projects).values(rows);
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < 10; i++) {
      const { kept, next } = await listPage(env.DB, projects, [eq(projects.orgId, orgId)], cursor, 2, { at: "updatedAtMs" });
      seen.push(...kept.map((r) => r.id));
      if (next === null) break;
      cursor = next;
    }
    const byUpdate = [...rows].sort((a, b) => b.updatedAtMs - a.updatedAtMs || (a.id < b.id ? 1 : -1)).map((r) => r.id);
    expect(seen).toEqual(byUpdate);
    const byCreation = (await listPage(env.DB, projects, [eq(projects.orgId, orgId)], undefined, 10, { at: "createdAtMs" })).kept.map((r) => r.id);
    expect(byCreation).toEqual(rows.map((r) => r.id));
  });
});
