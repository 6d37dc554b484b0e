// Recovery after an outage or a deploy (src/recovery.ts; ../shared/spec/run-lifecycle.md,
// "Completion and recovery"): the run is reconciled against what can confirm it and the
// observation persisted (`run.recovered`), once per recovery. A recovery's epoch is also where the
// reaper's window starts: a running attempt gets a full window from then.

import { isRefusal } from "../../src/errors";
import { reapDeadline } from "../../src/run/rules/reaper";
import { queuedPublication } from "../../src/run/publication";
import { HELD_STATES } from "../../src/run/states";
import type { RunRecord } from "../../src/run/types";
import { verifyStoredCheckpoint } from "./checkpoint";
import type { RunCore } from "./core";
import { finishPending } from "./pending";
import { reconcilePublication } from "./publication";

/** What recover() found and did. */
export interface Recovered {
  state: string;
  observed: string;
  problem: string | null;
}

/** Reconciles the run in the recovery that started at `epochMs`, once per recovery. */
export async function recover(core: RunCore, epochMs: number): Promise<Recovered> {
  const run = core.load();
  if (!run) return { state: "missing", observed: "no such run", problem: null };
  if (run.recoveredEpochMs === epochMs) return { state: run.state, observed: "observed already in this recovery", problem: null };
  const { observed, problem } = await observe(core, run, epochMs);
  const applied = core.apply({ type: "recovered", epochMs, observed, problem });
  await finishPending(core, { notify: false, graceFromMs: epochMs });
  return { state: isRefusal(applied) ? run.state : applied.run.state, observed, problem };
}

/** The recovery `epochMs` passed over this run after `tries` failed tries (src/recovery.ts): recorded as its recovery_failure. */
export async function recoveryFailed(core: RunCore, epochMs: number, tries: number, error: string): Promise<void> {
  const applied = core.apply({ type: "recovery_failed", epochMs, tries, error });
  if (!isRefusal(applied)) await finishPending(core, { notify: false });
}

/** Pending publications against the code host, paused runs against their stored checkpoint, running attempts against their runner. */
async function observe(core: RunCore, run: RunRecord, epochMs: number): Promise<{ observed: string; problem: string | null }> {
  if (run.state === "publishing" || queuedPublication(run) !== null) {
    // 0: this is the recovery's own reconciliation, never skipped as done by it.
    const answer = await reconcilePublication(core, epochMs, 0);
    return { observed: `publication reconciled against the code host and the branch: ${answer.publication} (now ${answer.state})`, problem: null };
  }
  if (run.state === "paused") return verifyStoredCheckpoint(core, run);
  if (HELD_STATES.includes(run.state)) return awaitRunner(core, run, epochMs);
  return { observed: `nothing to reconcile while ${run.state}`, problem: null };
}

/** The reaper's deadline with the recovery's grace: the runner's next lease refresh or report confirms the attempt, or it is reaped. */
function awaitRunner(core: RunCore, run: RunRecord, epochMs: number): { observed: string; problem: null } {
  core.apply({ type: "deadline", recoveredAtMs: epochMs, jitter: Math.random() });
  const now = core.load()!;
  if (!HELD_STATES.includes(now.state)) return { observed: `attempt ${run.attempt} ended by the reaper: ${now.state}`, problem: null };
  const until = reapDeadline(now, core.config, epochMs);
  return {
    observed: `attempt ${now.attempt} on machine ${now.machineId}: awaiting its runner's next report or lease refresh, reaped if none by ${until === null ? "its lease" : new Date(until).toISOString()}`,
    problem: null,
  };
}
