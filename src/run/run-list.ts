// The runs list (GET /v1/runs): its filters over the D1 projection (src/db/schema.ts, runs) and a
// listed row as the API gives it (docs/protocol.md, "Runs").

import { and, desc, eq, sql, type SQL } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { runMachines, runs } from "../db/schema";
import { afterCursor, listPage, pageOf } from "../lib/pagination";

export interface RunListFilters {
  state?: string;
  project_id?: string;
  label?: string;
  machine_id?: string;
}

/**
 * One page of the organization's runs that meet the filters, newest first. By machine, the page is
 * read from that machine's run_machines rows, each joined to its run (every run the machine took in
 * any attempt, and only those read); otherwise over the runs table's own indexes.
 */
export async function listRuns(db: D1Database, orgId: string, filters: RunListFilters, cursor: string | undefined, limit: number) {
  const conditions = runListConditions(orgId, filters);
  if (!filters.machine_id) return listPage(db, runs, conditions, cursor, limit, { at: "createdAtMs" });
  const where = [eq(runMachines.orgId, orgId), eq(runMachines.machineId, filters.machine_id), ...conditions];
  if (cursor !== undefined) where.push(afterCursor(runMachines.runCreatedAtMs, runMachines.runId, cursor));
  const rows = await drizzle(db)
    .select({ run: runs })
    .from(runMachines)
    .innerJoin(runs, eq(runs.id, runMachines.runId))
    .where(and(...where))
    .orderBy(desc(runMachines.runCreatedAtMs), desc(runMachines.runId))
    .limit(limit + 1);
  return pageOf(rows.map((r) => r.run), limit);
}

/**
 * The conditions on the runs table of the organization's runs that meet every filter given but the
 * machine (listRuns). A label is matched
 * exactly as one of the labels after the protocol in labels_key (`process|gpu,linux` has `gpu` and
 * `linux`, not `gp`); labels never hold `,` or `|` (src/protocol/common.ts, label), so the
 * comma-bounded search cannot straddle two labels.
 */
export function runListConditions(orgId: string, filters: RunListFilters): SQL[] {
  const conditions = [eq(runs.orgId, orgId)];
  if (filters.state) conditions.push(eq(runs.state, filters.state));
  if (filters.project_id) conditions.push(eq(runs.projectId, filters.project_id));
  if (filters.label) {
    const labelsOf = sql`',' || substr(${runs.labelsKey}, instr(${runs.labelsKey}, '|') + 1) || ','`;
    conditions.push(sql`instr(${labelsOf}, ${`,${filters.label},`}) > 0`);
  }
  return conditions;
}

/** A listed run: its projection row, in the API's words. */
export function runSummary(r: typeof runs.$inferSelect) {
  return {
    id: r.id,
    state: r.state,
    attempt: r.attempt,
    version: r.version,
    priority: -r.orderPriority,
    labels_key: r.labelsKey,
    title: r.title,
    repository: r.repositoryUrl,
    project_id: r.projectId,
    machine_id: r.machineId,
    not_before_ms: r.notBeforeMs,
    created_at_ms: r.createdAtMs,
    started_at_ms: r.startedAtMs,
    ended_at_ms: r.endedAtMs,
    updated_at_ms: r.updatedAtMs,
  };
}
