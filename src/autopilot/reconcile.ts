// Reconciliation, the admission guarantee (../shared/spec/run-lifecycle.md, "Admission"): GitHub
// never retries a failed webhook delivery, so each project's ready issues, and the tickets that
// hold an unfinished run, are walked again through the same admission path as the webhook. Each
// pass is bounded per call (AUTOPILOT_RECONCILE_BATCH tickets) and resumes from a cursor
// persisted in D1: first the tracker's pages of ready issues, then the tickets with a run (a run
// whose issue lost its ready label is found there and withdrawn while still queued) or an admission
// left unfinished by a crash.

import type { Config } from "../config";
import type { Env } from "../env";
import { log } from "../lib/log";
import { admitTicket, type AdmissionResult } from "./admission";
import type { AdmissionDeps, AdmissionProject, AdmissionSecrets } from "./deps";
import { admissionDeps } from "./wiring";
import type { AdmissionDoor } from "./ticket-types";

type Phase = "ready" | "tracked";

interface Cursor {
  phase: Phase;
  cursor: string | null;
}

/** The row that remembers where the walk over projects stopped (project ids start with "apj_"). */
const PROJECTS_CURSOR_ID = "*projects";

export interface ReconcileSummary {
  project_id: string;
  door: AdmissionDoor;
  examined: number;
  results: AdmissionResult[];
  failures: { number: number; reason: string }[];
  /** The pass reached its end; the next one starts from the first ready issue. */
  pass_complete: boolean;
}

async function readCursor(env: Env, id: string): Promise<Cursor> {
  const row = await env.DB.prepare("SELECT phase, cursor FROM autopilot_reconcile WHERE project_id = ?").bind(id).first<{ phase: Phase; cursor: string | null }>();
  return row ?? { phase: "ready", cursor: null };
}

async function writeCursor(env: Env, id: string, cursor: Cursor): Promise<void> {
  await env.DB.prepare(
    `INSERT INTO autopilot_reconcile (project_id, phase, cursor, updated_at_ms) VALUES (?, ?, ?, ?)
     ON CONFLICT (project_id) DO UPDATE SET phase = excluded.phase, cursor = excluded.cursor, updated_at_ms = excluded.updated_at_ms`,
  )
    .bind(id, cursor.phase, cursor.cursor, Date.now())
    .run();
}

/**
 * Examines up to `budget` tickets of one project from its persisted cursor, through admitTicket.
 * One issue whose facts cannot be read is a failure in the summary; the pass goes on.
 */
export async function reconcileProject(
  env: Env,
  config: Config,
  deps: AdmissionDeps,
  project: AdmissionProject & { secrets: AdmissionSecrets },
  budget: number,
  door: AdmissionDoor,
): Promise<ReconcileSummary> {
  const provider = deps.provider(project, project.secrets, config);
  const summary: ReconcileSummary = { project_id: project.id, door, examined: 0, results: [], failures: [], pass_complete: false };
  let at = await readCursor(env, project.id);
  // A ready issue with a run is in both phases: one step examines it once.
  const seen = new Set<number>();
  const examine = async (number: number) => {
    if (seen.has(number)) return;
    seen.add(number);
    summary.examined += 1;
    try {
      summary.results.push(await admitTicket(env, config, project, provider, deps.rules, number, { door, deliveryId: null, sender: null }));
    } catch (err) {
      summary.failures.push({ number, reason: String(err) });
    }
  };
  // Each round examines at least one ticket or moves to the next phase; an empty page that still
  // names a cursor is bounded by the round count.
  for (let round = 0; round < budget + 2 && summary.examined < budget && !summary.pass_complete; round++) {
    const left = budget - summary.examined;
    if (at.phase === "ready") {
      const page = await provider.listReadyIssues(project.readyLabel, at.cursor, left);
      for (const issue of page.issues.slice(0, left)) await examine(issue.ref.number);
      at = page.cursor === null ? { phase: "tracked", cursor: null } : { phase: "ready", cursor: page.cursor };
    } else {
      const rows = await env.DB.prepare(
        "SELECT ticket_key, number FROM autopilot_tickets WHERE project_id = ? AND (run_id IS NOT NULL OR status = 'admitting') AND ticket_key > ? ORDER BY ticket_key LIMIT ?",
      )
        .bind(project.id, at.cursor ?? "", left)
        .all<{ ticket_key: string; number: number }>();
      for (const row of rows.results) await examine(row.number);
      if (rows.results.length < left) {
        summary.pass_complete = true;
        at = { phase: "ready", cursor: null };
      } else at = { phase: "tracked", cursor: rows.results[rows.results.length - 1].ticket_key };
    }
  }
  await writeCursor(env, project.id, at);
  log("autopilot.reconciled", {
    project: project.id,
    door,
    examined: summary.examined,
    admitted: summary.results.filter((r) => r.outcome === "admitted").length,
    lapsed: summary.results.filter((r) => r.outcome === "lapsed").length,
    failures: summary.failures.length,
    pass_complete: summary.pass_complete,
    reason: "reconciliation is the admission guarantee; the webhook is the fast path",
  });
  return summary;
}

/**
 * The cron's door: projects in id order from where the last tick stopped, AUTOPILOT_RECONCILE_BATCH
 * tickets and AUTOPILOT_RECONCILE_PROJECTS_MAX projects at most. `startup` (the first tick after a
 * deploy or an outage, src/sweep.ts) restarts every project's pass from its beginning, so webhooks
 * lost while Docket was away are found.
 */
export async function reconcileTick(env: Env, config: Config, startup: boolean): Promise<{ projects: number; examined: number }> {
  const deps = admissionDeps(env);
  const door: AdmissionDoor = startup ? "startup" : "reconcile";
  if (startup) {
    await env.DB.prepare("DELETE FROM autopilot_reconcile").run();
    log("autopilot.startup_reconcile", { reason: "the first tick after a deploy or an outage: every project's pass starts again" });
  }
  const { cursor } = await readCursor(env, PROJECTS_CURSOR_ID);
  const projects = await deps.listProjects(env, cursor, config.autopilotReconcileProjectsMax);
  let examined = 0;
  let visited = 0;
  let resumeAfter: string | null = cursor;
  for (const listed of projects) {
    if (examined >= config.autopilotReconcileBatch) break;
    visited += 1;
    const project = await deps.readProject(env, listed.id);
    if (project) {
      try {
        const summary = await reconcileProject(env, config, deps, project, config.autopilotReconcileBatch - examined, door);
        examined += summary.examined;
        if (!summary.pass_complete) break;
      } catch (err) {
        // The tracker is unreachable for this project: the next tick tries it again after the others.
        log("autopilot.reconcile_failed", { project: listed.id, door, reason: String(err) });
      }
    }
    resumeAfter = listed.id;
  }
  // Past the last project the walk starts over from the first.
  const wrapped = projects.length < config.autopilotReconcileProjectsMax && resumeAfter === (projects[projects.length - 1]?.id ?? cursor);
  await writeCursor(env, PROJECTS_CURSOR_ID, { phase: "ready", cursor: wrapped ? null : resumeAfter });
  return { projects: visited, examined };
}
