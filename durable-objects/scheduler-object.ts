// SchedulerObject: one per organization. It picks queued runs for claims in queue order and wakes
// long-poll waiters the moment matching work arrives (../shared/DESIGN.md, "Claims are serialized
// per organization"; ../shared/spec/run-lifecycle.md, "Queue and dispatch"). Claims run
// concurrently: the object keeps the candidates it is asking, so no run object is asked by two
// claims at once, and the run object's compare-and-swap stays the one guarantee of one machine per
// attempt. This class owns the storage, the alarm and the RPC entry points; the decisions live in
// scheduler/ (waiters, label sets, queue heads, claim rounds, claim gates, slot backstop) and in
// scheduler-gates.ts (the gates, slots and budget holds in this object's SQLite).

import { DurableObject } from "cloudflare:workers";
import { loadConfig, type Config } from "../src/config";
import type { Env } from "../src/env";
import { asRefusal, isRefusal } from "../src/errors";
import { machineDeregistered } from "../src/credentials/tokens";
import { ClaimCredentialsCache } from "./claim-credentials";
import { addCost, noCost, type Cost } from "../src/lib/cost";
import type { ClaimAnswer } from "../src/run/claim-answer";
import { admissionRefusal, firstClosed, type GateVerdict } from "../src/autopilot/scheduler-gates";
import { migrateOnStart, storeDb } from "./store";
import { SCHEDULER_STORE } from "./stores";
import { SchedulerGates, type GatesChange, type HoldEnd, type SchedulerView } from "./scheduler-gates";
import { ClaimGates } from "./scheduler/claim-gates";
import { ClaimRounds } from "./scheduler/claim-round";
import { LabelSets } from "./scheduler/label-sets";
import { QueueHeads } from "./scheduler/queue-heads";
import { checkSlots } from "./scheduler/slot-backstop";
import { Waiters, type PollEnd } from "./scheduler/waiters";

/** A claim as the Worker hands it over: its machine token, hashed, is checked here (claim-credentials.ts). */
export interface ClaimRequest {
  orgId: string;
  tokenHash: string;
  /** The launch protocols this deployment and the runner share. */
  protocols: string[];
  /** What the runner said of itself, recorded as its heartbeat. */
  offered: { cli_version: string; protocols: string[] };
  waitMs: number;
}

/*
 * What this object keeps in memory, and why losing it to an eviction is safe (../shared/STYLE.md,
 * "An object's memory is a cache"). What must survive lives in its SQLite (scheduler-gates.ts):
 * project gates, slots (one per run attempt), budget holds and the spent count; the slot
 * backstop's alarm is armed whenever a slot is taken and again by a new instance that finds slots.
 * - waiters (scheduler/waiters.ts): the long-polls die with the instance; their runners ask again
 *   (a dropped claim is a 5xx). Its deregistered machines: a deregistration is in D1 first, and
 *   the machine's token is refused at its next check.
 * - labelSets (scheduler/label-sets.ts): the known label sets and the read under way, read again
 *   from D1 (label_sets) by the next claim; where the next window starts (rotation) and a count of
 *   arrived work: a new instance starts its windows at the first set and reads the list afresh.
 * - heads (scheduler/queue-heads.ts): the asks in flight, the settled asks, the head reads under way
 *   and open, the reads kept ahead, their sequence and a count of arrived work, which end with the
 *   instance; the run object's compare-and-swap keeps one machine per attempt, and a slot whose
 *   ask never answered is reconciled by the backstop.
 * - claimGates' credit-short projects (scheduler/claim-gates.ts): only the reason a queued run's
 *   `waiting` gives; the next reservation says it again.
 * - stats: counters for readStats.
 * - credentials (claim-credentials.ts): verified machine tokens, checked against D1 again.
 * - gates' closed projects (scheduler/closed-projects.ts): every project's verdict, computed again
 *   from its SQLite at the first head read; a claim checks a candidate's gates from SQLite all the same.
 */
export class SchedulerObject extends DurableObject<Env> {
  private readonly config: Config;
  /** Autopilot projects' gates, slots and budget holds, in this object's SQLite. */
  private readonly gates: SchedulerGates;
  /** The machine tokens this scheduler verified, and the sweep row it read. */
  private readonly credentials: ClaimCredentialsCache;
  private readonly waiters: Waiters;
  private readonly labelSets: LabelSets;
  private readonly heads: QueueHeads;
  private readonly claimGates: ClaimGates;
  private readonly rounds: ClaimRounds;
  /** Claims and what they cost since this object started (readStats). */
  private readonly stats = { claims: 0, granted: 0, cost: noCost() };

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.config = loadConfig(env);
    const db = storeDb(ctx);
    // The schema before any call can read it (durable-objects/scheduler-schema.ts).
    migrateOnStart(ctx, db, SCHEDULER_STORE);
    this.gates = new SchedulerGates(db, this.config.autopilotSchedulerConcurrencyDefault);
    this.credentials = new ClaimCredentialsCache(env.DB, this.config);
    // The modules read the limits through this object at each use, so one set on a live instance
    // (as the tests of a limit do) holds for all of them.
    const config = () => this.config;
    this.waiters = new Waiters(config);
    this.labelSets = new LabelSets(env.DB, config);
    this.heads = new QueueHeads(env.DB, config, this.gates);
    this.claimGates = new ClaimGates(env, this.gates, () => this.armBackstop());
    this.rounds = new ClaimRounds(env, config, this.labelSets, this.heads, this.claimGates, (key) => void this.notifyWork(key));
    // An instance that starts over slots (after a reset, perhaps between a slot taken and its alarm
    // written) makes sure the backstop will look at them.
    if (this.gates.slotCount() > 0) void ctx.blockConcurrencyWhile(() => this.armBackstop());
  }

  // ---- claims and long-polls ---------------------------------------------------------------------

  /**
   * A long-poll claim: a grant as soon as matching work exists, or null after `waitMs`. Its
   * credentials are checked first; the machine's heartbeat is written beside the look at the queue.
   */
  async claim(req: ClaimRequest): Promise<ClaimAnswer> {
    const cost = noCost();
    const checked = await this.credentials.check(req.orgId, req.tokenHash, cost);
    if (isRefusal(checked)) return { grant: null, cost, refused: checked };
    if ("held" in checked) return { grant: null, cost, held: checked.held };
    const { machine } = checked;
    const touched = this.credentials.touch(machine, req.offered, cost);
    const claimant = { orgId: req.orgId, machineId: machine.machineId, labels: machine.labels, protocols: req.protocols };
    const end = await this.waiters.longPoll(claimant, req.waitMs, () => this.rounds.tryClaim(claimant, cost));
    const answer = this.answered(end, cost);
    await touched;
    return answer;
  }

  /** The claim's answer, counted in the stats. */
  private answered(end: PollEnd, cost: Cost): ClaimAnswer {
    this.stats.claims += 1;
    if (end.grant) this.stats.granted += 1;
    addCost(this.stats.cost, cost);
    if (end.deregistered) return { grant: null, cost, refused: asRefusal(machineDeregistered()) };
    return end.shed ? { grant: end.grant, cost, shed: { limit: this.config.claimWaitersMax } } : { grant: end.grant, cost };
  }

  /**
   * A stopping runner ends the claim it leaves waiting (POST /v1/runners/claim/cancel), so no run
   * is handed to an answer no one reads. Answers how many claims it ended.
   */
  async cancelClaims(orgId: string, machineId: string): Promise<number> {
    return this.waiters.end(orgId, machineId, "its runner is stopping");
  }

  /**
   * An admin deregistered the machine (its D1 row is written first): its token is no longer taken
   * as verified, its waiting claims end now, and a claim whose credentials were checked just before
   * gets no work either, so no run is handed to a machine its organization removed
   * (docs/protocol.md, "Runners"). Remembered for one claim wait (CLAIM_WAIT_MS).
   */
  async forgetMachine(machineId: string): Promise<void> {
    this.credentials.forget(machineId);
    this.waiters.deregister(machineId);
  }

  /** A heartbeat set the machine's labels: its next claim reads them (its claims waiting now keep theirs). */
  async machineChanged(machineId: string): Promise<void> {
    this.credentials.forget(machineId);
  }

  /**
   * The machines whose claim waits for work now: a managed pool counts its runners idle by it
   * (src/managed/scaler.ts). In memory, so an eviction forgets them until their next claim.
   */
  async waitingMachines(): Promise<string[]> {
    return this.waiters.machineIds();
  }

  /** Called by a run object when its run becomes claimable. */
  async notifyWork(key: string): Promise<void> {
    this.heads.workArrived();
    this.labelSets.workArrived(key);
    this.waiters.wakeCovering(key);
  }

  async readStats() {
    return { ...this.stats, cost: { ...this.stats.cost }, waiters: this.waiters.size, closedVerdicts: this.gates.closedVerdictsComputed };
  }

  // ---- autopilot scheduler gates (docs/protocol.md, "Autopilot scheduler") ----------------------

  /** The project's gates, slots, budget and each gate's verdict now. */
  async schedulerView(projectId: string): Promise<SchedulerView> {
    const now = Date.now();
    const gates = this.gates.read(projectId);
    const usage = this.gates.usage(projectId);
    return {
      gates,
      concurrency_limit: gates.concurrency ?? this.config.autopilotSchedulerConcurrencyDefault,
      slots: this.gates.slotHolders(projectId, this.config.autopilotSchedulerConcurrencyMax),
      budget_held_cents: usage.heldCents,
      budget_spent_cents: usage.spentCents,
      verdicts: this.claimGates.verdicts(projectId, now),
      admission: admissionRefusal(gates),
    };
  }

  /** Changes the project's gates; the slots it now holds are answered for the caller to pause. */
  async changeGates(projectId: string, change: GatesChange): Promise<SchedulerView> {
    this.gates.change(projectId, change, Date.now());
    this.heads.dropAhead();
    // Opening a gate may make queued work claimable: wake every waiting claim to look again.
    this.waiters.wakeAll();
    return this.schedulerView(projectId);
  }

  /** The first of the project's gates that holds the run back now, or null when all are open (GET /v1/runs/:id, "waiting"). */
  async closedGate(projectId: string, runId: string): Promise<GateVerdict | null> {
    const holdsSlot = this.gates.slotHolders(projectId, this.config.autopilotSchedulerConcurrencyMax).some((s) => s.run_id === runId);
    if (holdsSlot) return null;
    return firstClosed(this.claimGates.verdicts(projectId, Date.now()));
  }

  /** Why the project's admission of new tickets is refused now (TicketObject), or null. */
  async admissionRefusal(projectId: string): Promise<string | null> {
    return admissionRefusal(this.gates.read(projectId));
  }

  /** A run object's attempt left the slot-holding states: that attempt's slot goes back and waiting claims look again. */
  async releaseSlot(runId: string, attempt: number): Promise<boolean> {
    const released = this.gates.release(runId, attempt);
    if (released) {
      this.heads.dropAhead();
      this.waiters.wakeAll();
    }
    return released;
  }

  /** The run's reservation settled (or went to cost review) in the ledger: its budget hold ends, once. */
  async endBudgetHold(runId: string, end: HoldEnd): Promise<boolean> {
    return this.gates.endHold(runId, end, Date.now());
  }

  /** An admin resolved the run's reservation held for cost review: its budget hold settles with that cost, once. */
  async settleReviewedBudgetHold(runId: string, costCents: number): Promise<boolean> {
    return this.gates.settleReviewedHold(runId, costCents, Date.now());
  }

  // ---- the slot backstop's alarm (scheduler/slot-backstop.ts) ------------------------------------

  private async armBackstop(): Promise<void> {
    if ((await this.ctx.storage.getAlarm()) === null) await this.ctx.storage.setAlarm(Date.now() + this.config.autopilotSchedulerSlotCheckMs);
  }

  /** Gives back the slots whose runs no longer execute, or whose claims never reached their run object. */
  async checkSlots(): Promise<{ checked: number; released: string[] }> {
    return checkSlots({
      env: this.env,
      config: this.config,
      gates: this.gates,
      asking: (runId) => this.heads.isAsking(runId),
      release: (runId, attempt) => this.releaseSlot(runId, attempt),
    });
  }

  async alarm(): Promise<void> {
    try {
      await this.checkSlots();
    } finally {
      if (this.gates.slotCount() > 0) await this.ctx.storage.setAlarm(Date.now() + this.config.autopilotSchedulerSlotCheckMs);
    }
  }
}
