// SchedulerObject: one per organization. Claims are serialized here so a queued run is handed to
// one machine per attempt, and long-poll waiters are woken the moment matching work arrives
// (../shared/DESIGN.md, "Claims are serialized per organization"; ../shared/spec/run-lifecycle.md,
// "Queue and dispatch": claiming a slot and recording dispatch must be serialized).

import { DurableObject } from "cloudflare:workers";
import { loadConfig, type Config } from "../src/config";
import type { Env } from "../src/env";
import { isRefusal, type Refusal } from "../src/errors";
import { addCost, addD1, countedAll, countedBatch, noCost, type Cost } from "../src/lib/cost";
import { log } from "../src/lib/log";
import { covers } from "../src/run/labels";
import type { ClaimGrant } from "./run-object";
import { admissionRefusal, SLOT_STATES, type GateVerdict } from "../src/autopilot/scheduler-gates";
import { releaseRunBudget, reserveRunBudget } from "../src/autopilot/run-budget";
import { SCHEDULER_OBJECT_MIGRATIONS } from "./scheduler-schema";
import { SchedulerGates, type Admission, type GatesChange, type HoldEnd } from "./scheduler-gates";
import { migrate } from "./sql-migrations";

export interface ClaimRequest {
  orgId: string;
  machineId: string;
  labels: string[];
  protocols: string[];
  waitMs: number;
}

interface Waiter {
  labels: string[];
  protocols: string[];
  wake: () => void;
}

/**
 * A claim's answer and what it cost: every round's D1 rows and Durable Object requests. `shed`:
 * no work, and the scheduler already holds CLAIM_WAITERS_MAX long-polls, so this one was not kept.
 */
export interface ClaimAnswer {
  grant: ClaimGrant | null;
  cost: Cost;
  shed?: { limit: number };
}

interface Candidate {
  id: string;
  order_group: number;
  order_priority: number;
  queued_at_ms: number;
  project_id: string | null;
}

/** The head of one label set's queue, in queue order (the runs_queue index serves it). */
const QUEUE_HEAD_SQL = `SELECT id, order_group, order_priority, queued_at_ms, project_id FROM runs
  WHERE org_id = ? AND labels_key = ? AND state = 'queued' AND not_before_ms <= ?
  ORDER BY order_group, order_priority, queued_at_ms, id LIMIT ?`;

/**
 * The same head without the runs of autopilot projects whose gates are closed (a JSON list), so a
 * gated project's queued runs never crowd other work out of the head.
 */
const GATED_QUEUE_HEAD_SQL = `SELECT id, order_group, order_priority, queued_at_ms, project_id FROM runs
  WHERE org_id = ? AND labels_key = ? AND state = 'queued' AND not_before_ms <= ?
    AND (project_id IS NULL OR project_id NOT IN (SELECT value FROM json_each(?)))
  ORDER BY order_group, order_priority, queued_at_ms, id LIMIT ?`;

/** An autopilot project's scheduler as the API shows it (docs/protocol.md, "Autopilot scheduler"). */
export interface SchedulerView {
  gates: ReturnType<SchedulerGates["read"]>;
  concurrency_limit: number;
  slots: { run_id: string; taken_at_ms: number }[];
  budget_held_cents: number;
  budget_spent_cents: number;
  verdicts: GateVerdict[];
  admission: string | null;
}

interface LabelSetCache {
  orgId: string;
  keys: Set<string>;
  readAtMs: number;
  /** Sets whose empty head still had queued runs (waiting out a backoff): not tried again until the next read. */
  kept: Set<string>;
}

/**
 * Removes a label set whose queue holds no queued run at all. In one statement, so a run projected
 * as queued before it keeps its set, and one projected after it adds the set again (projectRun).
 */
const FORGET_LABEL_SET_SQL = `DELETE FROM label_sets WHERE org_id = ?1 AND labels_key = ?2
  AND NOT EXISTS (SELECT 1 FROM runs WHERE org_id = ?1 AND labels_key = ?2 AND state = 'queued')`;

export class SchedulerObject extends DurableObject<Env> {
  private readonly config: Config;
  private readonly waiters = new Set<Waiter>();
  private tail: Promise<unknown> = Promise.resolve();
  private labelSetCache: LabelSetCache | null = null;
  /** notifyWork calls so far: a removal that overlapped one keeps its set (forgetEmpty). */
  private notifications = 0;
  /** Where the next claim's window of label sets starts, when a runner covers more than fit in one. */
  private rotation = 0;
  /** Claims and what they cost since this object started (readStats). */
  private stats = { claims: 0, granted: 0, cost: noCost() };
  /** Autopilot projects' gates, slots and budget holds, in this object's SQLite. */
  private readonly gates: SchedulerGates;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.config = loadConfig(env);
    migrate(ctx.storage, SCHEDULER_OBJECT_MIGRATIONS);
    this.gates = new SchedulerGates(ctx.storage.sql, this.config.autopilotSchedulerConcurrencyDefault);
  }

  /** A long-poll claim: a grant as soon as matching work exists, or null after `waitMs`. */
  async claim(req: ClaimRequest): Promise<ClaimAnswer> {
    const deadline = Date.now() + Math.min(req.waitMs, this.config.claimWaitMs);
    const cost = noCost();
    const answer = (grant: ClaimGrant | null, shed = false): ClaimAnswer => {
      this.stats.claims += 1;
      if (grant) this.stats.granted += 1;
      addCost(this.stats.cost, cost);
      return shed ? { grant, cost, shed: { limit: this.config.claimWaitersMax } } : { grant, cost };
    };
    // Each round is bounded by claimCandidatesMax; rounds are bounded by the deadline.
    for (;;) {
      let woken = false;
      const waiter: Waiter = { labels: req.labels, protocols: req.protocols, wake: () => (woken = true) };
      // Register before looking, so work that arrives during the look still wakes this claim.
      this.waiters.add(waiter);
      const grant = await this.serialized(() => this.tryClaim(req, cost));
      if (grant) {
        this.waiters.delete(waiter);
        return answer(grant);
      }
      const remaining = deadline - Date.now();
      if (remaining <= 0) {
        this.waiters.delete(waiter);
        return answer(null);
      }
      // Full: refuse instead of answering "no work" at once, which runners would re-ask without a pause.
      if (this.waiters.size > this.config.claimWaitersMax) {
        this.waiters.delete(waiter);
        return answer(null, true);
      }
      if (!woken) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, remaining);
          waiter.wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
      this.waiters.delete(waiter);
      if (Date.now() >= deadline) return answer(null);
    }
  }

  /** Called by a run object when its run becomes claimable. */
  async notifyWork(key: string): Promise<void> {
    this.notifications += 1;
    if (this.labelSetCache && !this.labelSetCache.keys.has(key)) this.labelSetCache = null;
    for (const waiter of this.waiters) {
      if (covers(key, waiter.labels, waiter.protocols)) waiter.wake();
    }
  }

  async readStats() {
    return { ...this.stats, cost: { ...this.stats.cost }, waiters: this.waiters.size };
  }

  private serialized<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.tail.then(fn, fn);
    this.tail = next.catch(() => undefined);
    return next;
  }

  private async knownLabelSets(orgId: string, cost: Cost): Promise<Set<string>> {
    const now = Date.now();
    const cache = this.labelSetCache;
    if (cache && cache.orgId === orgId && now - cache.readAtMs < this.config.labelSetsTtlMs) return cache.keys;
    // label_sets holds only sets with queued work (and some just drained); the read is bounded all the same.
    const statement = this.env.DB.prepare("SELECT labels_key FROM label_sets WHERE org_id = ? ORDER BY labels_key LIMIT ?").bind(
      orgId,
      this.config.labelSetsReadMax,
    );
    const rows = await countedAll<{ labels_key: string }>(cost, statement);
    const keys = new Set(rows.map((r) => r.labels_key));
    this.labelSetCache = { orgId, keys, readAtMs: now, kept: new Set() };
    return keys;
  }

  /**
   * The label sets whose heads this claim reads: all the machine covers, or, when they are more than
   * claimLabelSetsMax, a window that moves on with every claim so each set gets its turn.
   */
  private claimWindow(covered: string[]): string[] {
    const max = this.config.claimLabelSetsMax;
    if (covered.length <= max) return covered;
    const start = this.rotation % covered.length;
    this.rotation = (start + max) % covered.length;
    return [...covered.slice(start), ...covered.slice(0, start)].slice(0, max);
  }

  /**
   * Removes the sets whose head read found nothing claimable and that hold no queued run at all, so
   * later claims stop reading them. A set that still holds runs in backoff is kept and not tried
   * again until the list is read again; a notifyWork during the removal drops the cached list.
   */
  private async forgetEmpty(orgId: string, emptyKeys: string[], cost: Cost): Promise<void> {
    const cache = this.labelSetCache;
    if (!cache || cache.orgId !== orgId) return;
    const keys = emptyKeys.filter((k) => !cache.kept.has(k));
    if (keys.length === 0) return;
    const seen = this.notifications;
    let results: D1Result[];
    try {
      results = await this.env.DB.batch(keys.map((k) => this.env.DB.prepare(FORGET_LABEL_SET_SQL).bind(orgId, k)));
    } catch (err) {
      // Only a saving: the claim's answer stands, and a later empty claim tries again.
      log("scheduler.label_sets_forget_failed", { org: orgId, count: keys.length, reason: String(err) });
      return;
    }
    for (const result of results) addD1(cost, result.meta);
    if (this.notifications !== seen || this.labelSetCache !== cache) {
      this.labelSetCache = null;
      return;
    }
    keys.forEach((key, i) => {
      if (results[i].meta.changes > 0) cache.keys.delete(key);
      else cache.kept.add(key);
    });
    log("scheduler.label_sets_forgotten", { org: orgId, count: results.filter((r) => r.meta.changes > 0).length, kept: cache.kept.size, reason: "no queued work left" });
  }

  /**
   * Reads the head of each queue the machine can serve (one batch, a few rows each, whatever the
   * queue depth) and asks the best candidates' run objects for the claim. Adds what it cost to `cost`.
   */
  private async tryClaim(req: ClaimRequest, cost: Cost): Promise<ClaimGrant | null> {
    const covered = [...(await this.knownLabelSets(req.orgId, cost))].filter((k) => covers(k, req.labels, req.protocols));
    const keys = this.claimWindow(covered);
    if (keys.length === 0) return null;
    const now = Date.now();
    const perKey = this.config.claimCandidatesMax;
    const closed = this.gates.closedProjects(now);
    const head = (key: string) =>
      closed.length === 0
        ? this.env.DB.prepare(QUEUE_HEAD_SQL).bind(req.orgId, key, now, perKey)
        : this.env.DB.prepare(GATED_QUEUE_HEAD_SQL).bind(req.orgId, key, now, JSON.stringify(closed), perKey);
    const heads = keys.map(head);
    const headRows = await countedBatch<Candidate>(cost, this.env.DB, heads);
    const emptyKeys = keys.filter((_key, i) => headRows[i].length === 0);
    const candidates = headRows
      .flat()
      .sort(
        (a, b) =>
          a.order_group - b.order_group ||
          a.order_priority - b.order_priority ||
          a.queued_at_ms - b.queued_at_ms ||
          (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
      )
      .slice(0, this.config.claimCandidatesMax);
    for (const candidate of candidates) {
      // Every gate of the candidate's project, checked and its slot taken in one synchronous step.
      const admitted = this.gates.admit(req.orgId, candidate, Date.now());
      if (!admitted.ok) {
        log("scheduler.gate_closed", { org: req.orgId, run_id: candidate.id, project: admitted.projectId, gate: admitted.gate, reason: admitted.reason });
        continue;
      }
      if (!(await this.reserveBudget(req.orgId, candidate, admitted))) continue;
      const stub = this.env.RUN.get(this.env.RUN.idFromName(candidate.id));
      cost.doRequests += 1;
      const { answer, cost: runCost }: { answer: ClaimGrant | Refusal; cost: Cost } = await stub.claimCounted(req.machineId);
      addCost(cost, runCost);
      if (!isRefusal(answer)) {
        if (admitted.projectId) await this.armBackstop();
        return answer;
      }
      await this.undoAdmission(req.orgId, candidate.id, admitted);
      // A stale queue row: the run object logged run.claim_refused and repaired the row; a row
      // without a run object has no attempt to name.
      if (answer.error.code === "not_found") log("scheduler.orphan_row", { run_id: candidate.id, reason: answer.error.message });
    }
    // Only a claim that found nothing pays for the removal: a grant goes back at once.
    await this.forgetEmpty(req.orgId, emptyKeys, cost);
    return null;
  }

  // ---- autopilot scheduler gates (docs/protocol.md, "Autopilot scheduler") ----------------------

  /**
   * Takes the run's model-spend reservation from the organization's credit when its admission took
   * a new budget hold; short credit gives the slot and the hold back and the claim moves on.
   */
  private async reserveBudget(orgId: string, candidate: Candidate, admitted: Extract<Admission, { ok: true }>): Promise<boolean> {
    if (admitted.newHoldCents === null || !admitted.projectId) return true;
    let outcome: Awaited<ReturnType<typeof reserveRunBudget>> | "failed";
    try {
      outcome = await reserveRunBudget(this.env, { orgId, runId: candidate.id, projectId: admitted.projectId, cents: admitted.newHoldCents });
    } catch (err) {
      log("scheduler.budget_reserve_failed", { org: orgId, run_id: candidate.id, reason: String(err) });
      outcome = "failed";
    }
    if (outcome === "reserved" || outcome === "already_reserved") return true;
    this.gates.release(candidate.id);
    this.gates.dropHold(candidate.id);
    log("scheduler.gate_closed", { org: orgId, run_id: candidate.id, project: admitted.projectId, gate: "budget", reason: outcome === "insufficient_credit" ? "the organization's available credit is short of the per-run reservation" : "the reservation could not be written" });
    return false;
  }

  /** The run object refused the claim: its slot, and a reservation taken for this claim, go back. */
  private async undoAdmission(orgId: string, runId: string, admitted: Extract<Admission, { ok: true }>): Promise<void> {
    if (!admitted.projectId) return;
    this.gates.release(runId);
    if (admitted.newHoldCents === null) return;
    this.gates.dropHold(runId);
    try {
      await releaseRunBudget(this.env, orgId, runId, "the run was not handed out");
    } catch (err) {
      log("scheduler.budget_release_failed", { org: orgId, run_id: runId, reason: String(err) });
    }
  }

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
      verdicts: this.gates.verdicts(projectId, now),
      admission: admissionRefusal(gates),
    };
  }

  /** Changes the project's gates; the slots it now holds are answered for the caller to pause. */
  async changeGates(projectId: string, change: GatesChange): Promise<SchedulerView> {
    this.gates.change(projectId, change, Date.now());
    // Opening a gate may make queued work claimable: wake every waiting claim to look again.
    for (const waiter of this.waiters) waiter.wake();
    return this.schedulerView(projectId);
  }

  /** Why the project's admission of new tickets is refused now (TicketObject), or null. */
  async admissionRefusal(projectId: string): Promise<string | null> {
    return admissionRefusal(this.gates.read(projectId));
  }

  /** A run object left the slot-holding states: its slot goes back and waiting claims look again. */
  async releaseSlot(runId: string): Promise<boolean> {
    const released = this.gates.release(runId);
    if (released) for (const waiter of this.waiters) waiter.wake();
    return released;
  }

  /** The run's reservation settled (or went to cost review) in the ledger: its budget hold ends, once. */
  async endBudgetHold(runId: string, end: HoldEnd): Promise<boolean> {
    return this.gates.endHold(runId, end, Date.now());
  }

  private async armBackstop(): Promise<void> {
    if ((await this.ctx.storage.getAlarm()) === null) await this.ctx.storage.setAlarm(Date.now() + this.config.autopilotSchedulerSlotCheckMs);
  }

  /**
   * The slot backstop: a bounded batch of slot holders, oldest checked first, is compared with its
   * run objects; a slot whose run left the slot-holding states (a release call that was lost) goes
   * back. A disabled project's holder that started executing since is asked to pause.
   */
  async checkSlots(): Promise<{ checked: number; released: string[] }> {
    const rows = this.gates.oldestChecked(this.config.autopilotSchedulerSlotCheckMax, Date.now());
    const released: string[] = [];
    for (const row of rows) {
      const stub = this.env.RUN.get(this.env.RUN.idFromName(row.run_id));
      try {
        const run = await stub.read(row.org_id);
        const state = isRefusal(run) ? null : run.state;
        if (state === null || !SLOT_STATES.has(state)) {
          if (await this.releaseSlot(row.run_id)) released.push(row.run_id);
        } else if (state === "implementing" && !this.gates.read(row.project_id).enabled) {
          await stub.control(row.org_id, { type: "pause", hold: false, reason: "scheduler disabled" });
        }
      } catch (err) {
        log("scheduler.slot_check_failed", { org: row.org_id, run_id: row.run_id, reason: String(err) });
      }
    }
    if (released.length > 0) log("scheduler.slots_released", { count: released.length, reason: "their runs no longer execute (backstop)" });
    return { checked: rows.length, released };
  }

  async alarm(): Promise<void> {
    try {
      await this.checkSlots();
    } finally {
      if (this.gates.slotCount() > 0) await this.ctx.storage.setAlarm(Date.now() + this.config.autopilotSchedulerSlotCheckMs);
    }
  }
}

