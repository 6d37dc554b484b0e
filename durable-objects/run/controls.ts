// What members, operators, the scheduler and outbox effects ask of a run: cancel, the autopilot's
// withdrawal of a queued run, and the control commands (pause, resume, block, authorize and the
// publication steps). Each is one command applied to the run, its side effects finished after.

import { isRefusal, type Refusal } from "../../src/errors";
import { logRun } from "../../src/lib/log";
import type { RunCommand, RunRecord } from "../../src/run/types";
import type { RunView } from "../../src/run/view";
import type { RunCore } from "./core";
import { finishPending } from "./pending";

/** The commands control() applies. */
export type ControlCommand = Extract<
  RunCommand,
  { type: "pause" | "quiesced" | "resume" | "block" | "authorize" | "publish" | "published" | "publish_interrupted" | "publish_failed" }
>;

export async function cancel(core: RunCore, orgId: string, by: string, reason: string | null): Promise<{ run: RunView; immediate: boolean } | Refusal> {
  const run = core.owned(orgId, false);
  if (isRefusal(run)) return run;
  const result = core.apply({ type: "cancel", by, reason });
  logCancelRequest(core.load() ?? run, by, reason, result);
  if ("error" in result) return result;
  await finishPending(core, { notify: true });
  return { run: core.view(result.run), immediate: result.run.state === "cancelled" };
}

/**
 * The pre-claim recheck of an autopilot run (../shared/spec/run-lifecycle.md, "Admission"): the
 * ticket that admitted it no longer backs it (label removed, new blocker, issue closed). A queued
 * run is cancelled with the reason in its history; the check and the cancel are one synchronous
 * step of this object, as a claim is, so the run is either already handed out or never starts.
 */
export async function withdraw(core: RunCore, orgId: string, reason: string): Promise<{ run: RunView; withdrawn: boolean } | Refusal> {
  const run = core.owned(orgId, false);
  if (isRefusal(run)) return run;
  if (run.state !== "queued") return { run: core.view(run), withdrawn: false };
  const result = core.apply({ type: "cancel", by: "autopilot", reason });
  if ("error" in result) return result;
  await finishPending(core, { notify: false });
  return { run: core.view(result.run), withdrawn: result.run.state === "cancelled" };
}

/** Pause, resume, block, authorize and publication steps (operator routes, the scheduler, outbox effects). */
export async function control(core: RunCore, orgId: string, command: ControlCommand): Promise<RunView | Refusal> {
  const run = core.owned(orgId, false);
  if (isRefusal(run)) return run;
  const result = core.apply(command);
  if ("error" in result) return result;
  await finishPending(core, { notify: true });
  return core.view(result.run);
}

/**
 * One line per cancel request, accepted or refused: who asked, why, and whether the run ended at
 * once or its runner was asked to stop (../shared/spec/dispatch-lifecycle.md, "Decisions").
 */
function logCancelRequest(run: RunRecord, by: string, reason: string | null, result: { run: RunRecord; seqs: number[] } | Refusal): void {
  const outcome = "error" in result ? "refused" : result.run.state === "cancelled" ? "cancelled" : "stop_requested";
  logRun("run.cancel_requested", {
    run: run.id,
    attempt: run.attempt,
    seq: "error" in result ? null : (result.seqs[result.seqs.length - 1] ?? null),
    by,
    reason: reason ?? "no reason given",
    immediate: outcome === "cancelled",
    outcome,
    refusal: "error" in result ? result.error.code : null,
    state: run.state,
  });
}
