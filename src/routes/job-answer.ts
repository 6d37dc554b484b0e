// A build job as every answer about one job shows it (docs/protocol.md, "Completion"): the job, its
// run's live state and its ledger entries, so dispatch, read and resolve answer one shape.

import type { AppEnv } from "../app-types";
import { jobView } from "../builds/payload";
import { runEngine } from "../builds/run-engine";
import type { JobRow } from "../builds/payload";
import { listEntries } from "../ledger/ledger";
import type { BuildJob } from "../protocol/builds";
import type { RunView } from "../run/view";

/** How many of the job's ledger entries an answer carries (newest first). */
const JOB_ENTRIES = 20;

/** The run's live state, or null when the job has no run yet or its object cannot be read now. */
export async function liveRun(env: AppEnv["Bindings"], orgId: string, runId: string | null): Promise<RunView | null> {
  if (!runId) return null;
  try {
    return await runEngine.read(env, orgId, runId);
  } catch {
    return null;
  }
}

export async function jobAnswer(env: AppEnv["Bindings"], job: JobRow): Promise<BuildJob> {
  const run = await liveRun(env, job.orgId, job.runId);
  const entries = await listEntries(env.DB, job.orgId, { jobId: job.id, limit: JOB_ENTRIES });
  return {
    ...jobView(job),
    run: run && { id: run.id, state: run.state, attempt: run.attempt, phase: run.phase, cost_cents: run.cost_cents, ended_at_ms: run.ended_at_ms },
    entries: entries.entries,
  };
}
