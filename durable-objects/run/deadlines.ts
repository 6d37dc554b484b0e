// One alarm, many deadlines (../shared/STYLE.md, partywhen's Scheduler): the run object's single
// alarm is armed at the earliest deadline of the stored run, derived from what is stored, never
// from a caller's copy.

import { logRun } from "../../src/lib/log";
import { reapDeadline } from "../../src/run/decide";
import { prStepDueAtMs, queuedPublication } from "../../src/run/publication";
import type { RunRecord } from "../../src/run/types";
import { outageMayBeOngoing, readWatermark, reaperGraceFromMs as graceFromWatermark } from "../../src/sweep";
import type { RunCore } from "./core";

/**
 * Arms the alarm at the stored run's next deadline. Synchronous: called right after a
 * transaction, the alarm is written with it, before any await lets another call or a crash in.
 * Answers the time armed. `finishedHere`: the caller finishes the change's side effects right
 * after (a claim), so they set no deadline of their own; a crash before they are done leaves them
 * to the run's next deadline (the launch deadline) or to the next claim that finds its queue row
 * stale.
 */
export function armAlarm(core: RunCore, graceFromMs = 0, opts: { earliestMs?: number; finishedHere?: boolean; armedAtMs?: number | null } = {}): number | null {
  const due = nextDeadlineMs(core, graceFromMs, opts.finishedHere);
  const at = due === null ? null : Math.max(opts.earliestMs ?? Date.now(), due);
  // Armed so by this call already (a claim's change): one alarm write, not one per step.
  if (at === opts.armedAtMs) return at;
  const write = at === null ? core.ctx.storage.deleteAlarm() : core.ctx.storage.setAlarm(at);
  write.catch((err) => {
    const run = core.load();
    if (run) logRun("run.alarm_write_failed", { run: run.id, attempt: run.attempt, reason: String(err) });
  });
  return at;
}

/**
 * The stored run's earliest deadline: the reaper's, the end of a backoff, and the retry of side
 * effects still pending (a change's own caller finishes them first; if it never does, this does).
 */
export function nextDeadlineMs(core: RunCore, graceFromMs: number, finishedHere = false): number | null {
  const run = core.load();
  if (!run) return null;
  const now = Date.now();
  const retryAt = now + core.config.outboxBackoffMs;
  const deadlines: number[] = [];
  const reap = reapDeadline(run, core.config, graceFromMs);
  if (reap !== null) deadlines.push(reap);
  if (run.state === "queued" && run.notBeforeMs > now) deadlines.push(run.notBeforeMs);
  const prStepAt = prStepDueAtMs(run); // publication: Docket's PR step, or a pushed continuation to resume
  if (prStepAt !== null) deadlines.push(prStepAt);
  if (queuedPublication(run) === "pushed") deadlines.push(now);
  if (!finishedHere) {
    if (core.projectedVersion() < run.version) deadlines.push(retryAt);
    const outboxAt = core.outbox.nextAttemptAtMs();
    if (outboxAt !== null) deadlines.push(Math.max(outboxAt, retryAt));
  }
  const pruneAt = core.outbox.pruneDueAtMs(run); // retention (durable-objects/outbox.ts)
  if (pruneAt !== null) deadlines.push(pruneAt);
  return deadlines.length === 0 ? null : Math.min(...deadlines);
}

/**
 * When the reaper's window starts (src/sweep.ts, reaperGraceFromMs). A watermark D1 cannot give
 * counts as an outage: the run gets the window from now, never a reap on a guess.
 */
export async function reaperGraceFromMs(core: RunCore, run: RunRecord): Promise<number> {
  const thresholdMs = core.config.sweepOutageThresholdMs;
  try {
    const watermark = await readWatermark(core.env.DB);
    const now = Date.now();
    if (watermark && outageMayBeOngoing(watermark.lastTickAtMs, now, thresholdMs)) {
      logRun("run.sweep_stale", { run: run.id, attempt: run.attempt, last_tick_at_ms: watermark.lastTickAtMs, reason: "no cron tick since an outage: the staleness window starts now" });
    }
    return graceFromWatermark(watermark, now, thresholdMs);
  } catch (err) {
    logRun("run.watermark_unavailable", { run: run.id, attempt: run.attempt, reason: `the staleness window starts now: ${String(err)}` });
    return graceFromWatermark("unavailable", Date.now(), thresholdMs);
  }
}
