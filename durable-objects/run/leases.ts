// Reports and leases: the calls a machine makes about its attempt (launched, lease, launch-failed,
// stopped, checkpoint-unusable) and the daemon's reports, each a command applied to the run. A
// lease call may wait for a directive (docs/protocol.md, "Lease waits").

import { isRefusal, refusal, type Refusal } from "../../src/errors";
import { sha256Hex } from "../../src/lib/crypto";
import { decide } from "../../src/run/decide";
import type { RunCommand } from "../../src/run/types";
import { attemptView, directivePending } from "../../src/run/view";
import type { AttemptAnswer, RunCore } from "./core";
import { finishPending } from "./pending";

/** The calls a machine makes about its attempt with its machine token. */
export type MachineCommand = Extract<RunCommand, { type: "launched" | "lease" | "launch_failed" | "stopped" | "checkpoint_unusable" }>;

/** A daemon report's body, as the route parsed it. */
export type ReportBody = Omit<Extract<RunCommand, { type: "report" }>, "type" | "attempt">;

/** Applies a command about the attempt and finishes its side effects; answers the attempt as it stands. */
export async function attemptCall(core: RunCore, command: RunCommand): Promise<AttemptAnswer | Refusal> {
  const result = core.apply(command);
  if ("error" in result) return result;
  await finishPending(core, { notify: true });
  return attemptView(result.run);
}

/** launched, lease, launch-failed, stopped and checkpoint-unusable; a lease or launched call may wait `waitMs`. */
export async function machineCall(core: RunCore, orgId: string, command: MachineCommand, waitMs: number): Promise<AttemptAnswer | Refusal> {
  const run = core.owned(orgId, true);
  if (isRefusal(run)) return run;
  const answer = await attemptCall(core, command.type === "launch_failed" ? { ...command, jitter: Math.random() } : command);
  if (isRefusal(answer) || waitMs <= 0 || (command.type !== "lease" && command.type !== "launched")) return answer;
  // The lease is renewed only when the call begins: half its TTL at most, so it cannot lapse during the wait.
  const boundMs = Math.min(waitMs, core.config.leaseWaitMaxMs, Math.floor(core.config.leaseTtlMs / 2));
  return leaseWait(core, command.attempt, command.machineId, answer, boundMs);
}

/** A daemon report, authorized by the run-attempt token; it counts as the attempt's heartbeat. */
export async function report(core: RunCore, token: string, body: ReportBody): Promise<AttemptAnswer | Refusal> {
  const row = await core.attemptOfToken(token);
  if (!row) return refusal("unauthorized", "the run-attempt token is not valid for this run");
  // decide() is pure and synchronous: the digest of a patch that may be published is computed here.
  const patch = body.final?.artifact?.patch ?? "";
  const final = body.final && patch.trim() !== "" ? { ...body.final, patchDigest: await sha256Hex(patch) } : body.final;
  return attemptCall(core, { type: "report", attempt: row.attempt, ...body, final });
}

/**
 * A renewed lease that waits (docs/protocol.md, "Lease waits"): the answer goes back after
 * `waitMs`, or at once when the run's attempt, state or directives change (apply() wakes it), so
 * a stop request reaches the runner without polling. The lease was renewed when the call began;
 * the answer is the attempt as it stands when the wait ends, or the refusal a lease would get then.
 */
async function leaseWait(core: RunCore, attempt: number, machineId: string, answer: AttemptAnswer, waitMs: number): Promise<AttemptAnswer | Refusal> {
  // A directive pending, or a change since the answer was made (while its side effects were
  // finished), is answered at once; past the bound, a call does not wait.
  const run = core.load();
  if (!run || run.attempt !== answer.attempt || run.state !== answer.state || directivePending(run)) return leaseAnswerNow(core, attempt, machineId);
  if (core.leaseWaiters.size >= core.config.leaseWaitersMax) return answer;
  await new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      core.leaseWaiters.delete(done);
      resolve();
    };
    const timer = setTimeout(done, waitMs);
    core.leaseWaiters.add(done);
  });
  return leaseAnswerNow(core, attempt, machineId);
}

/** The attempt as it stands, or the refusal a lease would get now; decided, not applied (the lease is not renewed again). */
function leaseAnswerNow(core: RunCore, attempt: number, machineId: string): AttemptAnswer | Refusal {
  const run = core.load();
  if (!run) return refusal("not_found", "no such run");
  const decision = decide(run, { type: "lease", attempt, machineId }, Date.now(), core.config);
  return decision.ok ? attemptView(run) : { error: decision.error };
}
