// The operator's scheduler commands for an autopilot project (docs/protocol.md, "Autopilot
// scheduler"; ../shared/spec/run-lifecycle.md, "Pause and continuation"): disable stops admission
// and dequeue and asks executing runs to pause (no operator hold); drain stops admission and
// dequeue and lets current work finish; enable re-queues paused runs without an operator hold
// through the ordinary gates, never clearing a hold, a tracker blocker or an unmet budget.

import { and, asc, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Config } from "../config";
import { runs } from "../db/schema";
import type { Env } from "../env";
import { isRefusal } from "../errors";
import { log } from "../lib/log";
import type { AutopilotScheduler } from "../protocol/autopilot-scheduler";
import type { GatesChange, SchedulerView } from "../../durable-objects/scheduler-gates";

function scheduler(env: Env, orgId: string) {
  return env.SCHEDULER.get(env.SCHEDULER.idFromName(orgId));
}

/** Why the project's scheduler admits no new ticket now ("scheduler disabled", "draining"), or null. */
export function admissionRefusal(env: Env, orgId: string, projectId: string): Promise<string | null> {
  return scheduler(env, orgId).admissionRefusal(projectId);
}

export function schedulerAnswer(projectId: string, view: SchedulerView): AutopilotScheduler {
  const { gates } = view;
  const budget = gates.budget;
  return {
    project_id: projectId,
    enabled: gates.enabled,
    draining: gates.draining,
    admission: { open: view.admission === null, reason: view.admission },
    window: gates.window && { days: gates.window.days, start: gates.window.start, end: gates.window.end, time_zone: gates.window.timeZone },
    concurrency: { limit: view.concurrency_limit, configured: gates.concurrency, in_use: view.slots.length, slots: view.slots },
    budget: budget && {
      limit_cents: budget.limitCents,
      per_run_cents: budget.perRunCents,
      held_cents: view.budget_held_cents,
      spent_cents: view.budget_spent_cents,
      left_cents: budget.limitCents - view.budget_held_cents - view.budget_spent_cents,
      reset_at_ms: gates.resetAtMs,
    },
    verdicts: view.verdicts,
    updated_at_ms: gates.updatedAtMs,
  };
}

export async function readScheduler(env: Env, orgId: string, projectId: string): Promise<AutopilotScheduler> {
  return schedulerAnswer(projectId, await scheduler(env, orgId).schedulerView(projectId));
}

export async function changeScheduler(env: Env, orgId: string, projectId: string, change: GatesChange): Promise<AutopilotScheduler> {
  return schedulerAnswer(projectId, await scheduler(env, orgId).changeGates(projectId, change));
}

interface CommandResult {
  scheduler: AutopilotScheduler;
  paused: string[];
  resumed: string[];
  skipped: { run_id: string; reason: string }[];
}

/** Disable: no admission, no dequeue, and each run holding a slot is asked to pause (no hold). */
export async function disableScheduler(env: Env, orgId: string, projectId: string, by: string): Promise<CommandResult> {
  const view = await scheduler(env, orgId).changeGates(projectId, { enabled: false });
  const result: CommandResult = { scheduler: schedulerAnswer(projectId, view), paused: [], resumed: [], skipped: [] };
  for (const slot of view.slots) {
    const answer = await env.RUN.get(env.RUN.idFromName(slot.run_id)).control(orgId, { type: "pause", hold: false, reason: "scheduler disabled" });
    // A claimed run not yet launched cannot pause: the slot backstop asks again once it executes.
    if (isRefusal(answer)) result.skipped.push({ run_id: slot.run_id, reason: answer.error.message });
    else result.paused.push(slot.run_id);
  }
  log("autopilot.scheduler_disabled", { org: orgId, project: projectId, by, paused: result.paused.length, skipped: result.skipped.length, reason: "an admin disabled the project's scheduler" });
  return { ...result, scheduler: await readScheduler(env, orgId, projectId) };
}

/** Drain: no admission, no dequeue; runs holding a slot go on to their end. */
export async function drainScheduler(env: Env, orgId: string, projectId: string, by: string): Promise<CommandResult> {
  const answer = await changeScheduler(env, orgId, projectId, { draining: true });
  log("autopilot.scheduler_draining", { org: orgId, project: projectId, by, reason: "an admin drains the project's scheduler" });
  return { scheduler: answer, paused: [], resumed: [], skipped: [] };
}

/**
 * Enable ("scheduler resume"): the project's paused runs (oldest first, at most
 * AUTOPILOT_SCHEDULER_RESUME_MAX) are queued again unless an operator holds them, then admission
 * and dequeue open. In that order, a claim already waiting when the gates open finds the
 * continuations queued beside the new work and takes them first (../shared/spec/run-lifecycle.md,
 * "Acceptance scenarios": eligible paused work precedes new tickets).
 */
export async function enableScheduler(env: Env, config: Config, orgId: string, projectId: string, by: string): Promise<CommandResult> {
  const paused = await drizzle(env.DB)
    .select({ id: runs.id })
    .from(runs)
    .where(and(eq(runs.orgId, orgId), eq(runs.projectId, projectId), eq(runs.state, "paused")))
    .orderBy(asc(runs.queuedAtMs), asc(runs.id))
    .limit(config.autopilotSchedulerResumeMax);
  const result: Omit<CommandResult, "scheduler"> = { paused: [], resumed: [], skipped: [] };
  for (const { id } of paused) {
    const answer = await env.RUN.get(env.RUN.idFromName(id)).control(orgId, { type: "resume", by: "scheduler" });
    if (isRefusal(answer)) result.skipped.push({ run_id: id, reason: answer.error.message });
    else result.resumed.push(id);
  }
  await scheduler(env, orgId).changeGates(projectId, { enabled: true, draining: false });
  log("autopilot.scheduler_enabled", { org: orgId, project: projectId, by, resumed: result.resumed.length, skipped: result.skipped.length, reason: "an admin enabled the project's scheduler" });
  return { ...result, scheduler: await readScheduler(env, orgId, projectId) };
}
