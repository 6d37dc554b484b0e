// A ticket waiting for capacity costs nothing per issue (docs/autopilot.md, "GitHub's rate limit";
// ../shared/spec/run-lifecycle.md, "Admission": a full queue is a capacity wait, kept with its
// reason). While the project's queue is full no ready issue can be admitted, so reconciliation
// reads no issue, blockers or events for one that would only wait: the ready list's page already
// says when each issue last changed. An issue its ticket saw after that change is passed over, one
// never seen is recorded as waiting by its ticket, and only one changed since is read in full (it
// may have been closed or lost its label). Once a place opens the walk reads each issue again.

import { and, count, eq, inArray, or } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { autopilotTickets as t } from "../db/autopilot-schema";
import { runs } from "../db/schema";
import type { Env } from "../env";
import type { AdmissionProject } from "./deps";
import type { ReadyIssue } from "./provider";

/** What the project's ticket index holds of one issue. */
export interface IndexedTicket {
  runId: string | null;
  updatedAtMs: number;
}

/** D1 binds at most 100 values a statement: the project id and up to this many issue numbers. */
const NUMBERS_PER_READ = 90;

/** Whether the project's admitted runs still waiting for a runner (and admissions under way) fill its queue. */
export async function queueFull(env: Env, project: Pick<AdmissionProject, "id" | "queueCapacity">): Promise<boolean> {
  const waiting = await drizzle(env.DB)
    .select({ n: count() })
    .from(t)
    .leftJoin(runs, eq(runs.id, t.runId))
    .where(and(eq(t.projectId, project.id), or(eq(t.status, "admitting"), eq(runs.state, "queued"))))
    .get();
  return (waiting?.n ?? 0) >= project.queueCapacity;
}

/** The index rows of these issues of the project, by issue number. */
export async function indexedTickets(env: Env, projectId: string, numbers: number[]): Promise<Map<number, IndexedTicket>> {
  const found = new Map<number, IndexedTicket>();
  for (let i = 0; i < numbers.length; i += NUMBERS_PER_READ) {
    const rows = await drizzle(env.DB)
      .select({ number: t.number, runId: t.runId, updatedAtMs: t.updatedAtMs })
      .from(t)
      .where(and(eq(t.projectId, projectId), inArray(t.number, numbers.slice(i, i + NUMBERS_PER_READ))))
      .all();
    for (const row of rows) found.set(row.number, { runId: row.runId, updatedAtMs: row.updatedAtMs });
  }
  return found;
}

/**
 * What a full queue leaves to do for one listed issue: `record` a wait (never seen), `read` it in
 * full (changed since its ticket last changed), or `pass` (unchanged; a ticket holding a run is
 * examined in the pass's walk over tickets with a run).
 */
export function stepWhileFull(issue: ReadyIssue, indexed: IndexedTicket | undefined): "record" | "read" | "pass" {
  if (!indexed) return "record";
  if (indexed.runId !== null) return "pass";
  return issue.updatedAtMs > indexed.updatedAtMs ? "read" : "pass";
}

export function capacityWaitReason(project: Pick<AdmissionProject, "queueCapacity">): string {
  return (
    `the project's queue is full (queue capacity ${project.queueCapacity}); reconciliation reads this issue ` +
    `when a place opens or the issue changes`
  );
}
