// The run's creation: its row and its run.created event in one transaction. A replayed dispatch
// finds the run and finishes what the first call may not have.

import { logRun } from "../../src/lib/log";
import { newQueuedRun, type NewRun } from "../../src/run/new-run";
import type { RunView } from "../../src/run/view";
import { runTable } from "../run-schema";
import type { RunCore } from "./core";
import { finishPending } from "./pending";

/**
 * Creates the run. Called again for an existing run (a replayed dispatch), it changes nothing but
 * finishes what the first call may not have: the queue row, the outbox, the wake-up, the alarm.
 */
export async function createRun(core: RunCore, input: NewRun): Promise<RunView> {
  if (core.load()) {
    await finishPending(core, { forceProjection: true, notify: true });
    return core.view(core.load()!);
  }
  const now = Date.now();
  const run = newQueuedRun(input, now);
  let seqs: number[] = [];
  core.ctx.storage.transactionSync(() => {
    core.db.insert(runTable).values({ id: run.id, state: run.state, attempt: run.attempt, version: run.version, doc: JSON.stringify(run) }).run();
    seqs = core.outbox.append(run, [{ type: "run.created", data: { state: run.state, brief: run.brief } }], now);
  });
  core.created(run);
  core.armAlarm();
  logRun("run.transition", { run: run.id, attempt: run.attempt, seq: seqs[0], from: null, to: "queued", reason: "dispatched", version: run.version });
  await finishPending(core, { notify: true });
  return core.view(run);
}
