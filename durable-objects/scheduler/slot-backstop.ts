// The slot backstop (docs/protocol.md, "Autopilot scheduler"): slots are given back when their
// run's attempt leaves the slot-holding states (releaseSlot), and this check, run by the
// scheduler's alarm, catches the releases that were lost and the claims whose answer never came.

import type { Config } from "../../src/config";
import type { Env } from "../../src/env";
import { isRefusal } from "../../src/errors";
import { log } from "../../src/lib/log";
import { SLOT_STATES } from "../../src/autopilot/scheduler-gates";
import type { SchedulerGates, SlotRow } from "../scheduler-gates";

export interface BackstopParts {
  env: Env;
  config: Config;
  gates: SchedulerGates;
  /** Whether a claim is asking the run's object right now (its slot may be about to start). */
  asking: (runId: string) => boolean;
  /** Gives the attempt's slot back and wakes waiting claims (SchedulerObject.releaseSlot). */
  release: (runId: string, attempt: number) => Promise<boolean>;
}

/**
 * A bounded batch of slot holders, oldest checked first, is compared with its run objects; a slot
 * whose attempt no longer executes (a release call that was lost) or never started (a claim whose
 * answer was lost, or a reset before the run object was asked) goes back. A disabled project's
 * holder that started executing since is asked to pause.
 */
export async function checkSlots(parts: BackstopParts): Promise<{ checked: number; released: string[] }> {
  const { env, config, gates } = parts;
  const now = Date.now();
  const rows = gates.oldestChecked(config.autopilotSchedulerSlotCheckMax, now);
  const released: string[] = [];
  for (const row of rows) {
    const stub = env.RUN.get(env.RUN.idFromName(row.run_id));
    try {
      const run = await stub.read(row.org_id);
      const verdict = slotVerdict(row, isRefusal(run) ? null : run, now - config.autopilotSchedulerSlotCheckMs, parts.asking(row.run_id));
      if (verdict === "free") {
        if (await parts.release(row.run_id, row.attempt)) released.push(row.run_id);
      } else if (verdict === "executing" && !isRefusal(run) && run.state === "implementing" && !gates.read(row.project_id).enabled) {
        await stub.control(row.org_id, { type: "pause", hold: false, reason: "scheduler disabled" });
      }
    } catch (err) {
      log("scheduler.slot_check_failed", { org: row.org_id, run_id: row.run_id, reason: String(err) });
    }
  }
  if (released.length > 0) log("scheduler.slots_released", { count: released.length, reason: "their runs no longer execute (backstop)" });
  return { checked: rows.length, released };
}

/**
 * A slot against its run as the run object tells it: `executing` (its attempt holds it), `free`
 * (that attempt ended, or its claim never reached the run object and is older than `staleBeforeMs`
 * with no ask under way here), or `wait` (its claim may still be on its way). Attempt 0: a slot
 * taken before slots had attempts, judged by the run's state alone.
 */
export function slotVerdict(slot: SlotRow, run: { state: string; attempt: number } | null, staleBeforeMs: number, asking: boolean): "executing" | "free" | "wait" {
  if (run === null) return "free";
  const attempt = slot.attempt === 0 ? run.attempt : slot.attempt;
  if (run.attempt > attempt) return "free";
  if (run.attempt === attempt) return SLOT_STATES.has(run.state) ? "executing" : "free";
  return asking || slot.taken_at_ms > staleBeforeMs ? "wait" : "free";
}
