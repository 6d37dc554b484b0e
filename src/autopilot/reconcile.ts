// Reconciliation, the admission guarantee (../shared/spec/run-lifecycle.md, "Admission"): GitHub
// never retries a failed webhook delivery, so each project's ready issues, and the tickets that
// hold an unfinished run, are walked again through the same admission path as the webhook. Each
// project examines at most AUTOPILOT_RECONCILE_BATCH tickets a tick, its own share, and resumes
// from a cursor persisted in D1 (reconcile-state.ts): first the tracker's ready issues (a stable
// position, whatever the share), then the tickets with a run (a run whose issue lost its ready
// label is found there and withdrawn while still queued) or an admission left unfinished by a crash.
// A full pass reads every ready issue now and then; the passes between read only the issues
// changed since the last pass began, so a ticket waiting for capacity costs nothing that counts.
// While the project's queue is full, a listed issue that waits costs only its share of the page
// (reconcile-waiting.ts), so a tick walks up to AUTOPILOT_RECONCILE_PAGES_MAX pages; and while a
// full pass spans several ticks, each tick also reads the issues changed since it began, so a lost
// webhook is found at the next tick however long the pass.
// Reconciliation stops while the installation's budget is under its reserve, or while the project's
// scheduler is disabled or draining, and says so.

import type { Config } from "../config";
import { and, asc, eq, gt, isNotNull, or } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { autopilotTickets as t } from "../db/autopilot-schema";
import type { Env } from "../env";
import { log } from "../lib/log";
import { admitTicket, recordCapacityWait, type AdmissionResult } from "./admission";
import type { ReadyIssue } from "./provider";
import { capacityWaitReason, indexedTickets, queueFull, stepWhileFull } from "./reconcile-waiting";
import { readyMarker, type AdmissionDeps, type AdmissionProject, type AdmissionSecrets } from "./deps";
import { admissionDeps } from "./wiring";
import type { AdmissionDoor } from "./ticket-types";
import { clearProjectError, recordProjectError } from "./last-error";
import { finishPass, readPassState, reserveReason, restartEveryPass, schedulerPauseReason, startPass, writePassState, type PassKind } from "./reconcile-state";
import { admissionRefusal } from "./scheduler-control";

export interface ReconcileSummary {
  project_id: string;
  door: AdmissionDoor;
  examined: number;
  results: AdmissionResult[];
  failures: { number: number; reason: string }[];
  /** The pass reached its end; the next one starts from the first ready issue. */
  pass_complete: boolean;
  /** full: every ready issue; changed: those updated since the last complete pass began. */
  pass: PassKind;
  /** Why nothing (more) was examined: the installation's budget is under its reserve; else null. */
  paused_reason: string | null;
}

/** The row that remembers where the walk over projects stopped (project ids start with "apj_"). */
const PROJECTS_CURSOR_ID = "*projects";

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
  const provider = deps.provider(project, project.secrets, config, env);
  const admitter = { env, config, provider, rules: deps.rules };
  let state = await readPassState(env.DB, project.id);
  if (state.passStartedAtMs === null) state = startPass(state, config, door === "operator");
  const summary: ReconcileSummary = { project_id: project.id, door, examined: 0, results: [], failures: [], pass_complete: false, pass: state.passKind, paused_reason: null };
  // The local gates first, as capacity is: a project whose scheduler admits nothing new spends no
  // GitHub request on a pass whose every ticket would be refused (docs/autopilot.md, "GitHub's rate limit").
  const closed = schedulerPauseReason(await admissionRefusal(env, project.orgId, project.id));
  const paused = async () => (summary.paused_reason = closed ?? reserveReason((await provider.headroom?.()) ?? null, config)) !== null;
  // A ready issue with a run is in both phases: one step examines it once.
  const seen = new Set<number>();
  const examine = async (number: number, read: boolean) => {
    if (seen.has(number)) return;
    seen.add(number);
    summary.examined += read ? 1 : 0;
    try {
      if (read) summary.results.push(await admitTicket(admitter, project, number, { door, deliveryId: null, sender: null }));
      else summary.results.push(await recordCapacityWait(env, project, number, door, capacityWaitReason(project)));
    } catch (err) {
      summary.failures.push({ number, reason: String(err) });
    }
  };
  // While the queue is full a listed issue is read only when it changed since its ticket last did.
  const visit = async (issues: ReadyIssue[], full: boolean) => {
    const indexed = full ? await indexedTickets(env, project.id, issues.map((i) => i.ref.number)) : null;
    for (const issue of issues) {
      const step = indexed ? stepWhileFull(issue, indexed.get(issue.ref.number)) : "read";
      if (step !== "pass") await examine(issue.ref.number, step === "read");
    }
  };
  // Each round examines at least one ticket, reads one page of the ready list (at most
  // AUTOPILOT_RECONCILE_PAGES_MAX a tick), or moves to the next phase; an empty page that still
  // names a cursor is bounded by the round count.
  let pages = 0;
  for (let round = 0; round < budget + config.autopilotReconcilePagesMax + 2 && summary.examined < budget && !summary.pass_complete && !(await paused()); round++) {
    const left = budget - summary.examined;
    if (state.phase === "ready") {
      if (pages++ >= config.autopilotReconcilePagesMax) break;
      // A full queue asks for a whole page: its issues cost no read of their own, only the changed ones do.
      const full = await queueFull(env, project);
      const page = await provider.listReadyIssues(readyMarker(project), state.cursor, full ? config.githubPageSize : left, state.passKind === "changed" ? state.sinceMs : null);
      await visit(full ? page.issues : page.issues.slice(0, left), full);
      state = page.cursor === null ? { ...state, phase: "tracked", cursor: null } : { ...state, cursor: page.cursor };
    } else {
      const rows = await trackedTickets(env, project.id, state.cursor, left);
      for (const row of rows) await examine(row.number, true);
      if (rows.length < left) {
        summary.pass_complete = true;
        state = finishPass(state);
      } else state = { ...state, cursor: rows[rows.length - 1]!.ticketKey };
    }
  }
  // A full pass that goes on past this tick: the issues changed since it began, one page, each tick.
  if (state.passKind === "full" && state.passStartedAtMs !== null && !summary.pass_complete && summary.paused_reason === null) {
    const changed = await provider.listReadyIssues(readyMarker(project), null, config.githubPageSize, state.passStartedAtMs);
    await visit(changed.issues, await queueFull(env, project));
  }
  await writePassState(env.DB, project.id, { ...state, pausedReason: summary.paused_reason });
  if (summary.failures.length === 0) await clearProjectError(env.DB, project.id);
  logPass(project.id, summary);
  return summary;
}

/** Tickets of the project holding a run or an unfinished admission, in key order after `afterKey`. */
async function trackedTickets(env: Env, projectId: string, afterKey: string | null, limit: number) {
  return drizzle(env.DB)
    .select({ ticketKey: t.ticketKey, number: t.number })
    .from(t)
    .where(and(eq(t.projectId, projectId), or(isNotNull(t.runId), eq(t.status, "admitting")), gt(t.ticketKey, afterKey ?? "")))
    .orderBy(asc(t.ticketKey))
    .limit(limit);
}

function logPass(projectId: string, summary: ReconcileSummary): void {
  log("autopilot.reconciled", {
    project: projectId,
    door: summary.door,
    pass: summary.pass,
    examined: summary.examined,
    admitted: summary.results.filter((r) => r.outcome === "admitted").length,
    lapsed: summary.results.filter((r) => r.outcome === "lapsed").length,
    failures: summary.failures.length,
    pass_complete: summary.pass_complete,
    paused: summary.paused_reason,
    reason: "reconciliation is the admission guarantee; the webhook is the fast path",
  });
}

/**
 * The cron's door: AUTOPILOT_RECONCILE_PROJECTS_MAX projects at most, in id order from where the
 * last tick stopped, each with its own AUTOPILOT_RECONCILE_BATCH tickets, so no project's backlog
 * uses up another's share. `startup` (the first tick after a deploy or an outage, src/sweep.ts)
 * restarts every project's pass from its beginning, so webhooks lost while Docket was away are found.
 */
export async function reconcileTick(env: Env, config: Config, startup: boolean): Promise<{ projects: number; examined: number }> {
  const deps = admissionDeps(env);
  const door: AdmissionDoor = startup ? "startup" : "reconcile";
  if (startup) {
    await restartEveryPass(env.DB);
    log("autopilot.startup_reconcile", { reason: "the first tick after a deploy or an outage: every project's pass starts again" });
  }
  const walk = await readPassState(env.DB, PROJECTS_CURSOR_ID);
  const projects = await deps.listProjects(env, walk.cursor, config.autopilotReconcileProjectsMax);
  let examined = 0;
  for (const listed of projects) {
    const project = await deps.readProject(env, listed.id);
    if (!project) continue;
    try {
      examined += (await reconcileProject(env, config, deps, project, config.autopilotReconcileBatch, door)).examined;
    } catch (err) {
      // The tracker is unreachable for this project: the next visit tries it again.
      log("autopilot.reconcile_failed", { project: listed.id, door, reason: String(err) });
      await recordProjectError(env.DB, listed.id, door, err, null, Date.now());
    }
  }
  // Past the last project the walk starts over from the first.
  const next = projects.length < config.autopilotReconcileProjectsMax ? null : projects[projects.length - 1]!.id;
  await writePassState(env.DB, PROJECTS_CURSOR_ID, { ...walk, cursor: next });
  return { projects: projects.length, examined };
}
