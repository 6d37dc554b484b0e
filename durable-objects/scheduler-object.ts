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
}

/** The head of one label set's queue, in queue order (the runs_queue index serves it). */
const QUEUE_HEAD_SQL = `SELECT id, order_group, order_priority, queued_at_ms FROM runs
  WHERE org_id = ? AND labels_key = ? AND state = 'queued' AND not_before_ms <= ?
  ORDER BY order_group, order_priority, queued_at_ms, id LIMIT ?`;

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

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.config = loadConfig(env);
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
    const heads = keys.map((key) => this.env.DB.prepare(QUEUE_HEAD_SQL).bind(req.orgId, key, now, perKey));
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
      const stub = this.env.RUN.get(this.env.RUN.idFromName(candidate.id));
      cost.doRequests += 1;
      const { answer, cost: runCost }: { answer: ClaimGrant | Refusal; cost: Cost } = await stub.claimCounted(req.machineId);
      addCost(cost, runCost);
      if (!isRefusal(answer)) return answer;
      // A stale queue row: the run object logged run.claim_refused and repaired the row; a row
      // without a run object has no attempt to name.
      if (answer.error.code === "not_found") log("scheduler.orphan_row", { run_id: candidate.id, reason: answer.error.message });
    }
    // Only a claim that found nothing pays for the removal: a grant goes back at once.
    await this.forgetEmpty(req.orgId, emptyKeys, cost);
    return null;
  }
}

