// A claim's pass through its candidate's project gates (docs/protocol.md, "Autopilot scheduler"):
// every gate checked and the slot taken in one synchronous step (scheduler-gates.ts), then the
// run's model-spend reservation taken from the organization's credit when the step took a new
// budget hold. A run never executes without its reservation (../shared/DESIGN.md, invariant 9), so
// short credit gives the slot and the hold back, and a claim the run object refuses does too.

import type { Env } from "../../src/env";
import { log } from "../../src/lib/log";
import type { GateVerdict } from "../../src/autopilot/scheduler-gates";
import { releaseRunBudget, reserveRunBudget } from "../../src/autopilot/run-budget";
import type { Admission, GateCandidate, SchedulerGates } from "../scheduler-gates";

/** A candidate the gates let through: its slot (and any new budget hold) is taken. */
export type Admitted = Extract<Admission, { ok: true }>;

/** Why a reservation was not held, as the run's `waiting` and the log say it. */
const BUDGET_REFUSALS: Readonly<Record<"insufficient_credit" | "ended" | "failed", (cents: number) => string>> = {
  insufficient_credit: (cents) => `the organization's available credit is short of the per-run reservation (${cents} cents): grant credit (POST /v1/credits/grants)`,
  ended: () => "the run's reservation was settled: its run has ended",
  failed: () => "the reservation could not be written",
};

export class ClaimGates {
  /**
   * Projects whose last budget reservation the organization's credit could not cover, and why: a
   * queued run of theirs says so in its `waiting` (verdicts) until a reservation succeeds.
   */
  private readonly creditShort = new Map<string, GateVerdict>();

  constructor(
    private readonly env: Env,
    private readonly gates: SchedulerGates,
    /** Arms the slot backstop's alarm (SchedulerObject owns the alarm). */
    private readonly armBackstop: () => Promise<void>,
  ) {}

  /**
   * Lets the candidate through its project's gates for `candidate.attempt`, its slot taken and its
   * reservation held, or answers null (logged) when a gate or the credit holds it back.
   */
  async admit(orgId: string, candidate: GateCandidate): Promise<Admitted | null> {
    // Every gate of the candidate's project, checked and its slot taken in one synchronous step.
    const admitted = this.gates.admit(orgId, candidate, Date.now());
    if (!admitted.ok) {
      log("scheduler.gate_closed", { org: orgId, run_id: candidate.id, project: admitted.projectId, gate: admitted.gate, reason: admitted.reason });
      return null;
    }
    // Armed before anything can fail or reset: a slot whose claim never answers is still checked.
    if (admitted.projectId) await this.armBackstop();
    return (await this.reserveBudget(orgId, candidate.id, candidate.attempt, admitted)) ? admitted : null;
  }

  /**
   * Takes the run's model-spend reservation from the organization's credit when its admission took
   * a new budget hold; short credit gives the slot and the hold back and the claim moves on.
   */
  private async reserveBudget(orgId: string, runId: string, attempt: number, admitted: Admitted): Promise<boolean> {
    if (admitted.newHoldCents === null || !admitted.projectId) return true;
    let outcome: Awaited<ReturnType<typeof reserveRunBudget>> | "failed";
    try {
      outcome = await reserveRunBudget(this.env, { orgId, runId, projectId: admitted.projectId, cents: admitted.newHoldCents });
    } catch (err) {
      log("scheduler.budget_reserve_failed", { org: orgId, run_id: runId, reason: String(err) });
      outcome = "failed";
    }
    if (outcome === "reserved" || outcome === "already_reserved") {
      this.creditShort.delete(admitted.projectId);
      return true;
    }
    // Not held: the run never executes without its reservation (../shared/DESIGN.md, invariant 9).
    this.gates.release(runId, attempt);
    this.gates.dropHold(runId);
    const reason = BUDGET_REFUSALS[outcome](admitted.newHoldCents);
    if (outcome === "insufficient_credit") this.creditShort.set(admitted.projectId, { gate: "budget", open: false, reason });
    log("scheduler.gate_closed", { org: orgId, run_id: runId, project: admitted.projectId, gate: "budget", reason });
    return false;
  }

  /** The run object refused the claim: its slot, and a reservation taken for this claim, go back. */
  async undo(orgId: string, runId: string, attempt: number, admitted: Admitted): Promise<void> {
    if (!admitted.projectId) return;
    this.gates.release(runId, attempt);
    if (admitted.newHoldCents === null) return;
    this.gates.dropHold(runId);
    try {
      await releaseRunBudget(this.env, orgId, runId, "the run was not handed out");
    } catch (err) {
      log("scheduler.budget_release_failed", { org: orgId, run_id: runId, reason: String(err) });
    }
  }

  /** The gates' verdicts, the budget's closed while the organization's credit last fell short of a reservation. */
  verdicts(projectId: string, nowMs: number): GateVerdict[] {
    const short = this.creditShort.get(projectId);
    const verdicts = this.gates.verdicts(projectId, nowMs);
    return short ? verdicts.map((v) => (v.gate === "budget" && v.open ? short : v)) : verdicts;
  }
}
