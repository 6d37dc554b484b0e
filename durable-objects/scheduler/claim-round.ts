// One look at the queue for a claim (../shared/spec/run-lifecycle.md, "Queue and dispatch"): the
// heads of the label sets its machine covers, read only as deep as the claim can use, and the
// candidates asked in queue order, each through its project's gates first. The run object's
// compare-and-swap stays the one guarantee of one machine per attempt; this module makes sure no
// run object is asked by two claims at once (queue-heads.ts).

import type { Config } from "../../src/config";
import type { Env } from "../../src/env";
import { isRefusal, type Refusal } from "../../src/errors";
import { addCost, type Cost } from "../../src/lib/cost";
import { log, logRun } from "../../src/lib/log";
import type { ClaimGrant } from "../run-object";
import type { ClaimGates } from "./claim-gates";
import type { Claimant, LabelSets } from "./label-sets";
import type { Candidate, QueueHeads } from "./queue-heads";

export class ClaimRounds {
  constructor(
    private readonly env: Env,
    private readonly config: () => Config,
    private readonly labelSets: LabelSets,
    private readonly heads: QueueHeads,
    private readonly gates: ClaimGates,
    /** The run may still be claimable after an ask failed: waiting claims look again (notifyWork). */
    private readonly workReturned: (key: string) => void,
  ) {}

  /**
   * Reads the heads of the queues the machine can serve, only as many rows as this claim can use
   * (one, plus those other claims are asking, plus those it was refused), and asks the best
   * candidate's run object for the claim; a refusal moves on to the next. A round whose rows were
   * all taken by other claims reads again, further. Adds what it cost to `cost`.
   */
  async tryClaim(req: Claimant, cost: Cost): Promise<ClaimGrant | null> {
    const keys = await this.labelSets.window(req, cost);
    if (keys.length === 0) return null;
    const refused = new Set<string>();
    // A candidate this claim may ask: not refused to it, not asked by another claim since the read.
    const usable = (c: Candidate, readSeq: number) => !refused.has(c.id) && !this.heads.busy(c.id, readSeq);
    let emptyKeys: string[] | null = null;
    let slack = 0;
    let asked = 0;
    // Bounded: at most claimCandidatesMax run objects asked, and as many rounds.
    for (let round = 0; round < this.config().claimCandidatesMax && asked < this.config().claimCandidatesMax; round++) {
      const heads = await this.heads.read(req.orgId, keys, refused.size + slack, usable, cost);
      emptyKeys ??= heads.emptyKeys;
      try {
        for (const candidate of heads.candidates) {
          if (!usable(candidate, heads.seq)) continue;
          if (asked >= this.config().claimCandidatesMax) break;
          asked += 1;
          const grant = await this.ask(req.orgId, candidate, req.machineId, cost);
          if (grant) return grant;
          refused.add(candidate.id);
        }
      } finally {
        this.heads.close(heads.seq);
      }
      if (!heads.full) break;
      // Every row this round read was taken meanwhile: read further, up to the candidate bound more.
      slack = Math.min(Math.max(1, slack * 2), this.config().claimCandidatesMax);
    }
    // Only a claim that found nothing pays for the removal: a grant goes back at once.
    await this.labelSets.forgetEmpty(req.orgId, emptyKeys ?? [], cost);
    return null;
  }

  /** Asks one candidate's run object for the claim, holding the candidate in flight meanwhile. */
  private async ask(orgId: string, candidate: Candidate, machineId: string, cost: Cost): Promise<ClaimGrant | null> {
    this.heads.startAsk(candidate);
    let failed = true;
    // The claim starts this attempt: its slot is taken for it, and the run object grants only it.
    const attempt = candidate.attempt + 1;
    try {
      const admitted = await this.gates.admit(orgId, { id: candidate.id, project_id: candidate.project_id, attempt });
      if (!admitted) {
        failed = false;
        return null;
      }
      const stub = this.env.RUN.get(this.env.RUN.idFromName(candidate.id));
      cost.doRequests += 1;
      let counted: { answer: ClaimGrant | Refusal; cost: Cost };
      try {
        counted = await stub.claimCounted(machineId, attempt);
      } catch (err) {
        // The run object may have committed the claim before the call failed: its slot and its
        // reservation stay, and the backstop asks the run object whether the attempt started.
        if (admitted.projectId) logRun("scheduler.claim_unknown", { run: candidate.id, attempt, org: orgId, reason: `the run object's answer was lost (${String(err)}): its slot and reservation are kept until the backstop asks it` });
        throw err;
      }
      const { answer, cost: runCost } = counted;
      addCost(cost, runCost);
      failed = false;
      if (!isRefusal(answer)) return answer;
      await this.gates.undo(orgId, candidate.id, attempt, admitted);
      // A stale queue row: the run object logged run.claim_refused and repaired the row; a row
      // without a run object has no attempt to name.
      if (answer.error.code === "not_found") log("scheduler.orphan_row", { run_id: candidate.id, reason: answer.error.message });
      return null;
    } finally {
      this.heads.endAsk(candidate);
      // The ask failed before an answer: the run may still be claimable, and claims that looked past it wait.
      if (failed) this.workReturned(candidate.key);
    }
  }
}
