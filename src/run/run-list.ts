// The runs list (GET /v1/runs): its filters over the D1 projection (src/db/schema.ts, runs) and a
// listed row as the API gives it (docs/protocol.md, "Runs").

import { eq, sql, type SQL } from "drizzle-orm";
import { runs } from "../db/schema";

export interface RunListFilters {
  state?: string;
  project_id?: string;
  label?: string;
  machine_id?: string;
}

/**
 * The conditions of the organization's runs that meet every filter given. A label is matched
 * exactly as one of the labels after the protocol in labels_key (`process|gpu,linux` has `gpu` and
 * `linux`, not `gp`); labels never hold `,` or `|` (src/protocol/common.ts, label), so the
 * comma-bounded search cannot straddle two labels.
 */
export function runListConditions(orgId: string, filters: RunListFilters): SQL[] {
  const conditions = [eq(runs.orgId, orgId)];
  if (filters.state) conditions.push(eq(runs.state, filters.state));
  if (filters.project_id) conditions.push(eq(runs.projectId, filters.project_id));
  if (filters.machine_id) conditions.push(eq(runs.machineId, filters.machine_id));
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
