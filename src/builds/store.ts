// Reads of projects, build requests and jobs, and the request's own writes (its plan, its label when
// a job's operation won), always scoped to the caller's organization.

import { and, eq, exists, gte, inArray, isNull, not, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { buildJobs, buildRequests, projects } from "../db/ledger-schema";
import { idempotencyKeys, machines } from "../db/schema";
import { DocketError } from "../errors";
import { statementOf } from "../lib/cost";
import { covers, labelsKey } from "../run/labels";
import type { JobRow, ProjectRow, RequestRow } from "./payload";
import { HELD_JOB_STATUSES, PLAN_EDITABLE_LABELS, type RequestLabel } from "./states";

export async function loadProject(db: D1Database, orgId: string, id: string): Promise<ProjectRow> {
  const row = await drizzle(db).select().from(projects).where(and(eq(projects.orgId, orgId), eq(projects.id, id))).get();
  if (!row) throw new DocketError("not_found", "no such project");
  return row;
}

export async function loadRequest(db: D1Database, orgId: string, id: string): Promise<RequestRow> {
  const row = await drizzle(db).select().from(buildRequests).where(and(eq(buildRequests.orgId, orgId), eq(buildRequests.id, id))).get();
  if (!row) throw new DocketError("not_found", "no such build request");
  return row;
}

export async function findJob(db: D1Database, orgId: string, id: string): Promise<JobRow | null> {
  return (await drizzle(db).select().from(buildJobs).where(and(eq(buildJobs.orgId, orgId), eq(buildJobs.id, id))).get()) ?? null;
}

export async function loadJob(db: D1Database, orgId: string, id: string): Promise<JobRow> {
  const job = await findJob(db, orgId, id);
  if (!job) throw new DocketError("not_found", "no such build job");
  return job;
}

/**
 * Moves the job's request to `label` when (and only when) operation `opId` won its job's
 * compare-and-swap, and, with `from`, only from that label. A D1 statement, for the operation's batch.
 */
export function labelIfWon(
  db: D1Database,
  job: Pick<JobRow, "orgId" | "id" | "requestId">,
  e: { label: RequestLabel; from?: RequestLabel; opId: string; nowMs: number },
): D1PreparedStatement {
  const orm = drizzle(db);
  const won = orm
    .select({ one: sql`1` })
    .from(buildJobs)
    .where(and(eq(buildJobs.orgId, job.orgId), eq(buildJobs.id, job.id), eq(buildJobs.lastOpId, e.opId)));
  const request = and(eq(buildRequests.orgId, job.orgId), eq(buildRequests.id, job.requestId), e.from ? eq(buildRequests.label, e.from) : undefined);
  return statementOf(db, orm.update(buildRequests).set({ label: e.label, updatedAtMs: e.nowMs }).where(and(request, exists(won))));
}

/**
 * Saves the request's plan and moves it to source review, in one conditional statement: only from a
 * label that allows it, and never while a job of the request holds a reservation, so a job always
 * runs the plan it reserved for. Answers whether it was saved.
 */
export async function savePlan(
  db: D1Database,
  request: RequestRow,
  plan: Pick<RequestRow, "pinnedCommit" | "migrationPlan" | "chainTarget">,
  by: string,
): Promise<boolean> {
  const orm = drizzle(db);
  const nowMs = Date.now();
  const heldJob = orm
    .select({ one: sql`1` })
    .from(buildJobs)
    .where(and(eq(buildJobs.orgId, request.orgId), eq(buildJobs.requestId, request.id), inArray(buildJobs.status, HELD_JOB_STATUSES)));
  const saved = await orm
    .update(buildRequests)
    .set({ ...plan, planSavedAtMs: nowMs, planSavedBy: by, label: "source_review", updatedAtMs: nowMs })
    .where(and(eq(buildRequests.orgId, request.orgId), eq(buildRequests.id, request.id), inArray(buildRequests.label, PLAN_EDITABLE_LABELS), not(exists(heldJob))));
  return saved.meta.changes === 1;
}

/** The run the run engine recorded for this key (the job id), if its dispatch got that far. */
export async function runIdForKey(db: D1Database, orgId: string, key: string): Promise<string | null> {
  const row = await drizzle(db)
    .select({ runId: idempotencyKeys.runId })
    .from(idempotencyKeys)
    .where(and(eq(idempotencyKeys.orgId, orgId), eq(idempotencyKeys.key, key)))
    .get();
  return row?.runId ?? null;
}

/** Recently seen machines a dispatcher asks about; bounded so the check stays cheap. */
const RUNNERS_CHECKED_MAX = 200;

/**
 * "A connected HTTPS runner": a registered (not deregistered) runner of the organization, heard from (register,
 * heartbeat or claim) within the heartbeat window, whose labels and protocols can serve the job.
 */
export async function hasConnectedRunner(
  db: D1Database,
  orgId: string,
  need: { protocol: string; labels: string[] },
  windowMs: number,
  nowMs: number,
): Promise<boolean> {
  const rows = await drizzle(db)
    .select({ labels: machines.labels, protocols: machines.protocols })
    .from(machines)
    .where(and(eq(machines.orgId, orgId), gte(machines.lastSeenAtMs, nowMs - windowMs), isNull(machines.deregisteredAtMs)))
    .limit(RUNNERS_CHECKED_MAX);
  const key = labelsKey(need.protocol, need.labels);
  return rows.some((m) => covers(key, JSON.parse(m.labels) as string[], JSON.parse(m.protocols) as string[]));
}
