// An autopilot project's runs as GET /v1/autopilot/projects/:id/runs lists them (docs/protocol.md,
// "Autopilot runs"): a keyset page of the runs its admission created (the D1 run index, newest
// first), each read from its run object (the authority on its blocker and publication) with its
// tracker deliveries' receipts from D1. A page costs one read of each of its runs, never more.

import { eq, type SQL } from "drizzle-orm";
import type { Config } from "../config";
import { runs } from "../db/schema";
import type { Env } from "../env";
import { isRefusal } from "../errors";
import { listPage } from "../lib/pagination";
import { runStub } from "../lib/stubs";
import type { AutopilotProjectRun } from "../protocol/autopilot-runs";
import type { RunView } from "../run/view";
import { listTrackerDeliveriesOf, trackerDeliveryView } from "../tracker/receipts";

export interface ProjectRunsQuery {
  state?: string;
  cursor?: string;
  limit: number;
}

/** One page of the project's runs, optionally of one state, and the next page's cursor. */
export async function listProjectRuns(env: Env, config: Config, orgId: string, projectId: string, query: ProjectRunsQuery): Promise<{ runs: AutopilotProjectRun[]; next: string | null }> {
  const conditions: SQL[] = [eq(runs.orgId, orgId), eq(runs.projectId, projectId)];
  if (query.state) conditions.push(eq(runs.state, query.state));
  const { kept, next } = await listPage(env.DB, runs, conditions, query.cursor, query.limit, { at: "createdAtMs" });
  const ids = kept.map((row) => row.id);
  const [views, deliveries] = await Promise.all([Promise.all(ids.map((id) => runStub(env, id).read(orgId))), listTrackerDeliveriesOf(env.DB, ids)]);
  const listed: AutopilotProjectRun[] = [];
  views.forEach((view, i) => {
    // A run object that no longer knows its run (retention removed it) leaves its index row behind: not listed.
    if (isRefusal(view)) return;
    listed.push(projectRun(view, (deliveries.get(ids[i]) ?? []).map((row) => trackerDeliveryView(row, config))));
  });
  return { runs: listed, next };
}

function projectRun(run: RunView, deliveries: AutopilotProjectRun["deliveries"]): AutopilotProjectRun {
  const meta = run.metadata ?? {};
  return {
    id: run.id,
    state: run.state,
    ticket: typeof meta.autopilot_ticket === "string" ? meta.autopilot_ticket : null,
    issue_url: typeof meta.issue_url === "string" ? meta.issue_url : null,
    title: run.brief.split("\n", 1)[0].trim(),
    last_error: run.last_error,
    blocker: run.blocker,
    publication: run.publication ?? null,
    deliveries,
    created_at_ms: run.created_at_ms,
    updated_at_ms: run.updated_at_ms,
  };
}
