// What a project's GitHub traffic costs and where its reconciliation stands, for the project read
// (GET /v1/autopilot/projects/:id) and the dashboard's project page (docs/autopilot.md, "GitHub's
// rate limit"): requests GitHub counted in the last hour, the installation's headroom as GitHub
// last stated it, and when the last full reconciliation pass finished.

import type { Config } from "../config";
import type { AutopilotProjectDetail } from "../protocol/autopilot";
import { countedLastHour, storedHeadroom } from "./github/usage-store";
import { readPassState } from "./reconcile-state";

type Budget = Pick<AutopilotProjectDetail, "github_budget" | "reconciliation">;

export async function projectBudget(db: D1Database, config: Config, project: { id: string; githubApiUrl: string; installationId: string }): Promise<Budget> {
  const [requests, headroom, pass] = await Promise.all([
    countedLastHour(db, project.id),
    storedHeadroom(db, project.githubApiUrl, project.installationId),
    readPassState(db, project.id),
  ]);
  return {
    github_budget: {
      requests_last_hour: requests,
      rate_limit: headroom ? { remaining: headroom.remaining, limit: headroom.limit, reset_at_ms: headroom.resetAtMs === 0 ? null : headroom.resetAtMs } : null,
      reserve: config.autopilotGithubReserve,
    },
    reconciliation: {
      state: pass.pausedReason === null ? "running" : "paused",
      paused_reason: pass.pausedReason,
      pass: pass.passStartedAtMs === null ? null : pass.passKind,
      last_full_pass_finished_at_ms: pass.fullPassFinishedAtMs,
    },
  };
}
