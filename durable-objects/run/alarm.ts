// The run object's alarm (../shared/STYLE.md, "Every failure path keeps the system live"): the
// reaper and other due deadlines, the retention of sent events, the queue row and outbox retried,
// the PR step taken. And the cron backstop's check that the alarm is armed at all.

import { logRun } from "../../src/lib/log";
import type { RunRecord } from "../../src/run/types";
import { outageMayBeOngoing, readWatermark, reaperGraceFromMs as graceFromWatermark } from "../../src/sweep";
import type { RunCore } from "./core";
import { finishPending, repairProjection } from "./pending";
import { advancePublication } from "./publication";

/**
 * Acts on due deadlines, then finishes pending side effects. Whatever fails, the alarm is armed
 * again from the stored run: the exception is logged, not thrown, so the runtime's bounded
 * retries never drop it.
 */
export async function onAlarm(core: RunCore): Promise<void> {
  const run = core.load();
  if (!run) return;
  const graceFromMs = await reaperGraceFromMs(core, run);
  try {
    core.apply({ type: "deadline", recoveredAtMs: graceFromMs, jitter: Math.random() });
    core.outbox.prune(core.load()!, Date.now()); // retention: sent events of a run ended long ago
    await finishPending(core, { notify: true, graceFromMs });
    await advancePublication(core);
  } catch (err) {
    const at = core.armAlarm(graceFromMs, { earliestMs: Date.now() + core.config.alarmRetryMs });
    logRun("run.alarm_failed", { run: run.id, attempt: run.attempt, reason: String(err), retry_at_ms: at });
  }
}

/**
 * The cron backstop (src/alarm-backstop.ts) found this run's queue row at `rowVersion`: finish
 * what a crash left pending, and arm the alarm if it is missing or later than the next deadline.
 */
export async function ensureAlarm(core: RunCore, rowVersion: number, graceFromMs: number): Promise<{ alarm_at_ms: number | null; rearmed: boolean }> {
  const run = core.load();
  if (!run) return { alarm_at_ms: null, rearmed: false };
  await repairProjection(core, rowVersion < run.version);
  await core.outbox.publish(run);
  const armed = await core.ctx.storage.getAlarm();
  const due = core.nextDeadlineMs(graceFromMs);
  if (due === null || (armed !== null && armed <= Math.max(Date.now(), due))) return { alarm_at_ms: armed, rearmed: false };
  const at = core.armAlarm(graceFromMs);
  const now = core.load()!;
  logRun("run.alarm_rearmed", { run: now.id, attempt: now.attempt, state: now.state, reason: armed === null ? "no alarm armed" : "alarm later than its deadline", alarm_at_ms: at });
  return { alarm_at_ms: at, rearmed: true };
}

/**
 * When the reaper's window starts (src/sweep.ts, reaperGraceFromMs). A watermark D1 cannot give
 * counts as an outage: the run gets the window from now, never a reap on a guess.
 */
async function reaperGraceFromMs(core: RunCore, run: RunRecord): Promise<number> {
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
