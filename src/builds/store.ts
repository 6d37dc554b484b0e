// Reads of projects, build requests and jobs, always scoped to the caller's organization.

import { and, eq, gte, isNull } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { buildJobs, buildRequests, projects } from "../db/ledger-schema";
import { idempotencyKeys, machines } from "../db/schema";
import { DocketError } from "../errors";
import { covers, labelsKey } from "../run/labels";
import type { JobRow, ProjectRow, RequestRow } from "./payload";

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
