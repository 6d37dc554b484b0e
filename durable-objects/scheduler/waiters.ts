// The scheduler's long-poll waiters (../shared/DESIGN.md, "Claims are serialized per organization"):
// a claim with no work waits here until matching work arrives, its machine claims again or stops,
// an admin deregisters the machine, or its wait runs out. In memory only: SchedulerObject lists
// why losing it to an eviction is safe.

import type { Config } from "../../src/config";
import { log } from "../../src/lib/log";
import { covers } from "../../src/run/labels";
import type { ClaimGrant } from "../run-object";
import type { Claimant } from "./label-sets";

interface Waiter {
  machineId: string;
  labels: string[];
  protocols: string[];
  wake: () => void;
  /** Ended by a newer claim of its machine or its runner's stop: it waits no more (end). */
  ended: boolean;
}

/**
 * How a long-poll ended: with a grant or none. `shed`: no work, and CLAIM_WAITERS_MAX long-polls
 * were already waiting, so this one was not kept. `deregistered`: an admin removed the machine.
 */
export interface PollEnd {
  grant: ClaimGrant | null;
  shed?: true;
  deregistered?: true;
}

export class Waiters {
  private readonly waiting = new Set<Waiter>();
  /** Machines deregistered in the last claim wait, by when (deregister): their claims get no work. */
  private readonly deregistered = new Map<string, number>();

  constructor(private readonly config: () => Config) {}

  get size(): number {
    return this.waiting.size;
  }

  /**
   * Looks for work with `look` until it grants one or the wait (at most CLAIM_WAIT_MS) ends,
   * waiting between looks until something wakes the claim. A newer claim of the machine ends the
   * one it left waiting first.
   */
  async longPoll(req: Claimant, waitMs: number, look: () => Promise<ClaimGrant | null>): Promise<PollEnd> {
    const deadline = Date.now() + Math.min(waitMs, this.config().claimWaitMs);
    this.end(req.orgId, req.machineId, "a newer claim of this machine came while this one waited");
    // Each look is bounded by claimCandidatesMax; looks are bounded by the deadline.
    for (;;) {
      // Checked before every look: a deregistration wakes the machine's waiting claims.
      if (this.deregistered.has(req.machineId)) return { grant: null, deregistered: true };
      let woken = false;
      const waiter: Waiter = { machineId: req.machineId, labels: req.labels, protocols: req.protocols, wake: () => (woken = true), ended: false };
      // Register before looking, so work that arrives during the look still wakes this claim.
      this.waiting.add(waiter);
      const grant = await look();
      if (grant || waiter.ended) {
        this.waiting.delete(waiter);
        return { grant };
      }
      const remaining = deadline - Date.now();
      if (remaining <= 0) {
        this.waiting.delete(waiter);
        return { grant: null };
      }
      // Full: refuse instead of answering "no work" at once, which runners would re-ask without a pause.
      if (this.waiting.size > this.config().claimWaitersMax) {
        this.waiting.delete(waiter);
        return { grant: null, shed: true };
      }
      if (!woken) await sleepUntilWoken(waiter, remaining);
      this.waiting.delete(waiter);
      if (waiter.ended || Date.now() >= deadline) return { grant: null };
    }
  }

  /**
   * Ends the machine's waiting claims (204), handed no work. A runner waits on one claim at a time
   * (docs/protocol.md, "Runner protocol"), so a machine's new claim means the one still waiting
   * lost its runner (a listener restarted, or a connection dropped and the claim was sent again);
   * a stopping runner says so itself. Work that arrives then goes to a claim whose runner is there
   * to take it, not to an answer no one reads (the run would sit claimed until its lease lapsed).
   * A claim in the middle of a look at the queue finishes it, and waits no more.
   */
  end(orgId: string, machineId: string, why: string): number {
    let ended = 0;
    for (const waiter of this.waiting) {
      if (waiter.machineId !== machineId || waiter.ended) continue;
      waiter.ended = true;
      waiter.wake();
      ended += 1;
    }
    if (ended > 0) log("scheduler.claim_ended", { org: orgId, machine: machineId, count: ended, reason: `${why}: its waiting claim ends without work` });
    return ended;
  }

  /** The machine was deregistered: its waiting claims wake to be refused, and so do its claims for one claim wait. */
  deregister(machineId: string): void {
    const now = Date.now();
    for (const [id, atMs] of this.deregistered) if (atMs <= now - this.config().claimWaitMs) this.deregistered.delete(id);
    this.deregistered.set(machineId, now);
    for (const waiter of this.waiting) if (waiter.machineId === machineId) waiter.wake();
  }

  /** The machines waiting for work now: idle runners (a runner at its concurrency does not claim). */
  machineIds(): string[] {
    return [...new Set([...this.waiting].filter((w) => !w.ended).map((w) => w.machineId))];
  }

  /** Work of label set `key` arrived: the claims whose machine covers it look again. */
  wakeCovering(key: string): void {
    for (const waiter of this.waiting) {
      if (covers(key, waiter.labels, waiter.protocols)) waiter.wake();
    }
  }

  /** Something every claim may care about changed (a gate, a slot): all look again. */
  wakeAll(): void {
    for (const waiter of this.waiting) waiter.wake();
  }
}

/** Resolves when the waiter is woken or after `ms`, whichever comes first. */
function sleepUntilWoken(waiter: Waiter, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    waiter.wake = () => {
      clearTimeout(timer);
      resolve();
    };
  });
}
