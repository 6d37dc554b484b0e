// The side effects a committed change leaves pending, finished from the stored run: the D1 queue
// row, the autopilot slot given back, the scheduler's wake-up, the outbox, then the alarm. Every
// path that finds the run finishes them, so whoever comes after a crash finishes the crashed
// call's work; what is done is recorded in storage (projected_version, slot_released_attempt).

import { eq, lt } from "drizzle-orm";
import { SLOT_STATES } from "../../src/autopilot/scheduler-gates";
import { addD1, noCost, type Cost } from "../../src/lib/cost";
import { logRun } from "../../src/lib/log";
import { labelsKey } from "../../src/run/labels";
import { projectRun } from "../../src/run/projection";
import type { RunRecord } from "../../src/run/types";
import type { Sending } from "../outbox";
import { runTable } from "../run-schema";
import type { RunCore } from "./core";

/**
 * Finishes what the stored run leaves pending (the queue row, forced when it may be lying; the
 * scheduler's wake-up when `notify` and the run is claimable; the outbox; the alarm). Answers with
 * its D1 rows and Durable Object requests.
 */
export async function finishPending(core: RunCore, opts: { forceProjection?: boolean; notify: boolean; graceFromMs?: number }): Promise<Cost> {
  const cost = await repairProjection(core, opts.forceProjection ?? false);
  const run = core.load()!;
  if (await releaseSlot(core, run)) cost.doRequests += 1;
  if (opts.notify && run.state === "queued" && run.notBeforeMs <= Date.now()) {
    await notifyScheduler(core, run);
    cost.doRequests += 1;
  }
  await core.outbox.publish(run);
  core.armAlarm(opts.graceFromMs ?? 0);
  return cost;
}

/**
 * finishPending() for a claim, whose commit already recorded the queue row written and the events
 * sent (run/claim.ts). Its events (run.state claimed) have no side effects for the consumer, so
 * they are stored in the queue row's own D1 batch (outbox.split), and any due event that has some
 * goes to the Queue at the same time: one round trip before the grant, and no commit after it
 * unless one failed. A failed queue row write is recorded as not made, failed events as unsent,
 * and the alarm retries them (the events through the Queue); a crash before either is repaired by
 * whoever finds the run next (a stale queue row refuses its claim and is rewritten; events never
 * confirmed go out again from the next instance). A claimed run needs no wake-up, and holds no
 * autopilot slot to give back.
 */
export async function finishClaim(core: RunCore, run: RunRecord, projectedBefore: number, sending: Sending | null, armedAtMs: number | null | undefined): Promise<Cost> {
  const { send, store } = sending ? core.outbox.split(sending) : { send: null, store: null };
  const [projected] = await Promise.all([writeQueueRow(core, run, store ? core.outbox.inserts(store) : []), send ? core.outbox.sendMarked(run, send) : null]);
  if (store) core.outbox.storedMarked(run, store, projected);
  if (!projected.ok) core.db.update(runTable).set({ projected_version: projectedBefore }).where(eq(runTable.projected_version, run.version)).run();
  core.armAlarm(0, { armedAtMs });
  return projected.cost;
}

/**
 * Writes the D1 queue row when it is behind this object (or, forced, when it may be lying); the
 * write only lands over an older version. A failure is retried from the alarm.
 */
export async function repairProjection(core: RunCore, force: boolean): Promise<Cost> {
  const run = core.load();
  if (!run || (!force && core.projectedVersion() >= run.version)) return noCost();
  const { ok, cost } = await writeQueueRow(core, run);
  if (ok) core.db.update(runTable).set({ projected_version: run.version }).where(lt(runTable.projected_version, run.version)).run();
  return cost;
}

/** A claim's events that an earlier instance never confirmed sent go out again (outbox.markSending); the alarm sends them. */
export function resendUnconfirmed(core: RunCore): void {
  const reclaimed = core.outbox.reclaimUnconfirmed(Date.now());
  const run = reclaimed > 0 ? core.load() : null;
  if (!run) return;
  const at = core.armAlarm();
  logRun("outbox.reclaimed", { run: run.id, attempt: run.attempt, count: reclaimed, retry_at_ms: at, reason: "sent by an earlier instance and never confirmed: sent again" });
}

/** One write of the run's D1 queue row, with `also` in its batch; a failure is logged and answered, never thrown. */
async function writeQueueRow(core: RunCore, run: RunRecord, also: D1PreparedStatement[] = []): Promise<{ ok: boolean; cost: Cost; error: unknown }> {
  const cost = noCost();
  try {
    addD1(cost, await projectRun(core.env.DB, run, also));
    return { ok: true, cost, error: null };
  } catch (err) {
    logRun("run.projection_failed", { run: run.id, attempt: run.attempt, version: run.version, reason: `the queue row was not written: ${String(err)}` });
    return { ok: false, cost, error: err };
  }
}

/**
 * An autopilot run that was handed out and no longer executes (queued again, paused, blocked,
 * ended) gives back its attempt's slot, and only that attempt's (docs/protocol.md, "Autopilot
 * scheduler"). Once per attempt, recorded in storage so a new instance after an eviction does
 * not ask again; a lost call is caught by the scheduler's backstop. Answers whether it asked.
 */
async function releaseSlot(core: RunCore, run: RunRecord): Promise<boolean> {
  if (!run.projectId || run.attempt === 0 || SLOT_STATES.has(run.state) || core.slotReleasedAttempt() >= run.attempt) return false;
  try {
    await core.env.SCHEDULER.get(core.env.SCHEDULER.idFromName(run.orgId)).releaseSlot(run.id, run.attempt);
    core.db.update(runTable).set({ slot_released_attempt: run.attempt }).where(lt(runTable.slot_released_attempt, run.attempt)).run();
  } catch (err) {
    logRun("run.slot_release_failed", { run: run.id, attempt: run.attempt, reason: `the scheduler was not told: ${String(err)}` });
  }
  return true;
}

async function notifyScheduler(core: RunCore, run: RunRecord): Promise<void> {
  try {
    const scheduler = core.env.SCHEDULER.get(core.env.SCHEDULER.idFromName(run.orgId));
    await scheduler.notifyWork(labelsKey(run.launch.protocol, run.labels));
  } catch (err) {
    logRun("run.notify_failed", { run: run.id, attempt: run.attempt, reason: `the scheduler was not woken: ${String(err)}` });
  }
}

