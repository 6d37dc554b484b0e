// SchedulerObject: one per organization. It picks queued runs for claims in queue order and wakes
// long-poll waiters the moment matching work arrives (../shared/DESIGN.md, "Claims are serialized
// per organization"; ../shared/spec/run-lifecycle.md, "Queue and dispatch"). Claims run
// concurrently: the object keeps the candidates it is asking, so no run object is asked by two
// claims at once, and the run object's compare-and-swap stays the one guarantee of one machine per
// attempt.

import { DurableObject } from "cloudflare:workers";
import { loadConfig, type Config } from "../src/config";
import type { Env } from "../src/env";
import { asRefusal, isRefusal, type Refusal } from "../src/errors";
import { machineDeregistered } from "../src/credentials/tokens";
import { ClaimCredentialsCache } from "./claim-credentials";
import { addCost, addD1, countedAll, countedBatch, noCost, type Cost } from "../src/lib/cost";
import { log, logRun } from "../src/lib/log";
import { covers } from "../src/run/labels";
import type { ClaimGrant } from "./run-object";
import { admissionRefusal, firstClosed, SLOT_STATES, type GateVerdict } from "../src/autopilot/scheduler-gates";
import { releaseRunBudget, reserveRunBudget } from "../src/autopilot/run-budget";
import { SCHEDULER_OBJECT_MIGRATIONS } from "./scheduler-schema";
import { SchedulerGates, type Admission, type GatesChange, type HoldEnd, type SlotRow } from "./scheduler-gates";
import { migrate } from "./sql-migrations";

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

/** The claimant once its credentials are checked. */
interface Claimant {
  orgId: string;
  machineId: string;
  labels: string[];
  protocols: string[];
}

interface Waiter {
  machineId: string;
  labels: string[];
  protocols: string[];
  wake: () => void;
  /** Ended by a newer claim of its machine or its runner's stop: it waits no more (endWaiting). */
  ended: boolean;
}

/**
 * A claim's answer and what it cost: every round's D1 rows and Durable Object requests. `shed`:
 * no work, and the scheduler already holds CLAIM_WAITERS_MAX long-polls, so this one was not kept.
 * `refused`: its token no longer works, or an admin deregistered the machine while its claim was
 * on its way or waiting. `held`: a recovery holds dispatch (src/recovery.ts), and why.
 */
export interface ClaimAnswer {
  grant: ClaimGrant | null;
  cost: Cost;
  shed?: { limit: number };
  refused?: Refusal;
  held?: string;
}

interface Candidate {
  id: string;
  order_group: number;
  order_priority: number;
  queued_at_ms: number;
  project_id: string | null;
  /** The attempt the queue row shows: its claim starts attempt + 1, the attempt its slot is taken for. */
  attempt: number;
  /** The label set whose head listed it (filled in after the read). */
  key: string;
}

/** A head read claims have joined and that has not started yet. */
interface PendingRead {
  claims: number;
  /** The most rows one of its claims was refused or saw taken, read beyond the others. */
  extra: number;
  heads: Promise<Heads>;
}

/** One round's read of the queue heads: the candidates in queue order, and what the read saw. */
interface Heads {
  candidates: Candidate[];
  /** Its place in the sequence of reads and settled asks (see `settled`). */
  seq: number;
  /** The claims that share it, and the D1 rows it read (the queue heads are only read). */
  claims: number;
  rowsRead: number;
  emptyKeys: string[];
  /** Some set answered as many rows as asked for: more may wait behind them. */
  full: boolean;
}

/** The head of one label set's queue, in queue order (the runs_queue index serves it). */
const QUEUE_HEAD_SQL = `SELECT id, order_group, order_priority, queued_at_ms, project_id, attempt FROM runs
  WHERE org_id = ? AND labels_key = ? AND state = 'queued' AND not_before_ms <= ?
  ORDER BY order_group, order_priority, queued_at_ms, id LIMIT ?`;

/**
 * The same head without the runs of autopilot projects whose gates are closed (a JSON list), so a
 * gated project's queued runs never crowd other work out of the head.
 */
const GATED_QUEUE_HEAD_SQL = `SELECT id, order_group, order_priority, queued_at_ms, project_id, attempt FROM runs
  WHERE org_id = ? AND labels_key = ? AND state = 'queued' AND not_before_ms <= ?
    AND (project_id IS NULL OR project_id NOT IN (SELECT value FROM json_each(?)))
  ORDER BY order_group, order_priority, queued_at_ms, id LIMIT ?`;

/** An autopilot project's scheduler as the API shows it (docs/protocol.md, "Autopilot scheduler"). */
export interface SchedulerView {
  gates: ReturnType<SchedulerGates["read"]>;
  concurrency_limit: number;
  slots: { run_id: string; attempt: number; taken_at_ms: number }[];
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
  /** The sets each machine label signature covers, so the covers() filter runs once per signature per read. */
  covered: Map<string, string[]>;
}

/**
 * Removes a label set whose queue holds no queued run at all. In one statement, so a run projected
 * as queued before it keeps its set, and one projected after it adds the set again (projectRun).
 */
const FORGET_LABEL_SET_SQL = `DELETE FROM label_sets WHERE org_id = ?1 AND labels_key = ?2
  AND NOT EXISTS (SELECT 1 FROM runs WHERE org_id = ?1 AND labels_key = ?2 AND state = 'queued')`;

/*
 * What this object keeps in memory, and why losing it to an eviction is safe (../shared/STYLE.md,
 * "An object's memory is a cache"). What must survive lives in its SQLite (scheduler-gates.ts):
 * project gates, slots (one per run attempt), budget holds and the spent count; the slot
 * backstop's alarm is armed whenever a slot is taken and again by a new instance that finds slots.
 * - waiters: long-polls die with the instance; their runners ask again (a dropped claim is a 5xx).
 * - deregistered: a deregistration is in D1 first; the machine's token is refused at its next check.
 * - labelSetCache, labelSetRead: read again from D1 (label_sets) by the next claim.
 * - inFlight, settled, openReads, readTails, nextReads, ahead, seq: the asks and head reads under
 *   way, which end with the instance; the run object's compare-and-swap keeps one machine per
 *   attempt, and a slot whose ask never answered is reconciled by the backstop.
 * - creditShort: only the reason a queued run's `waiting` gives; the next reservation says it again.
 * - notifications, rotation, stats: counters for fairness and readStats.
 * - credentials (claim-credentials.ts): verified machine tokens, checked against D1 again.
 * - gates' closed projects (closed-projects.ts): every project's verdict, computed again from its
 *   SQLite at the first head read; a claim checks a candidate's gates from SQLite all the same.
 */
export class SchedulerObject extends DurableObject<Env> {
  private readonly config: Config;
  private readonly waiters = new Set<Waiter>();
  /** Machines deregistered in the last claim wait, by when (forgetMachine): their claims get no work. */
  private readonly deregistered = new Map<string, number>();
  private labelSetCache: LabelSetCache | null = null;
  /** The label-set read under way, shared by the claims that need it meanwhile. */
  private labelSetRead: Promise<LabelSetCache> | null = null;
  /** Candidates a claim is asking right now, with their label set: other claims look past them. */
  private readonly inFlight = new Map<string, string>();
  /**
   * Candidates whose ask ended, with the sequence number at its end: a head read that started
   * before then may still list them as queued (the run object moved the row meanwhile).
   */
  private readonly settled = new Map<string, number>();
  /** Per window of label sets: the head read under way (its end), and the next one, which claims join. */
  private readonly readTails = new Map<string, Promise<void>>();
  private readonly nextReads = new Map<string, PendingRead>();
  /** The head reads whose candidates claims are still looking at, with how many claims. */
  private readonly openReads = new Map<number, number>();
  /**
   * Per window: the last head read and when it was made, kept for the claims that follow
   * (CLAIM_READ_AHEAD) until new work arrives. It holds its read open, so the asks settled since stay known.
   */
  private readonly ahead = new Map<string, { heads: Heads; atMs: number }>();
  /**
   * Projects whose last budget reservation the organization's credit could not cover, and why: a
   * queued run of theirs says so in its `waiting` (closedGate) until a reservation succeeds.
   */
  private readonly creditShort = new Map<string, GateVerdict>();
  private seq = 0;
  /** notifyWork calls so far: a removal that overlapped one keeps its set (forgetEmpty). */
  private notifications = 0;
  /** Where the next claim's window of label sets starts, when a runner covers more than fit in one. */
  private rotation = 0;
  /** Claims and what they cost since this object started (readStats). */
  private stats = { claims: 0, granted: 0, cost: noCost() };
  /** Autopilot projects' gates, slots and budget holds, in this object's SQLite. */
  private readonly gates: SchedulerGates;
  /** The machine tokens this scheduler verified, and the sweep row it read. */
  private readonly credentials: ClaimCredentialsCache;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.config = loadConfig(env);
    migrate(ctx.storage, SCHEDULER_OBJECT_MIGRATIONS);
    this.gates = new SchedulerGates(ctx.storage.sql, this.config.autopilotSchedulerConcurrencyDefault);
    this.credentials = new ClaimCredentialsCache(env.DB, this.config);
    // An instance that starts over slots (after a reset, perhaps between a slot taken and its alarm
    // written) makes sure the backstop will look at them.
    if (this.gates.slotCount() > 0) void ctx.blockConcurrencyWhile(() => this.armBackstop());
  }

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
    const answer = await this.claimFor({ orgId: req.orgId, machineId: machine.machineId, labels: machine.labels, protocols: req.protocols }, req.waitMs, cost);
    await touched;
    return answer;
  }

  private async claimFor(req: Claimant, waitMs: number, cost: Cost): Promise<ClaimAnswer> {
    const deadline = Date.now() + Math.min(waitMs, this.config.claimWaitMs);
    const answer = (grant: ClaimGrant | null, shed = false): ClaimAnswer => {
      this.stats.claims += 1;
      if (grant) this.stats.granted += 1;
      addCost(this.stats.cost, cost);
      return shed ? { grant, cost, shed: { limit: this.config.claimWaitersMax } } : { grant, cost };
    };
    this.endWaiting(req.orgId, req.machineId, "a newer claim of this machine came while this one waited");
    // Each round is bounded by claimCandidatesMax; rounds are bounded by the deadline.
    for (;;) {
      // Checked before every round: a deregistration wakes the machine's waiting claims.
      if (this.deregistered.has(req.machineId)) return { ...answer(null), refused: asRefusal(machineDeregistered()) };
      let woken = false;
      const waiter: Waiter = { machineId: req.machineId, labels: req.labels, protocols: req.protocols, wake: () => (woken = true), ended: false };
      // Register before looking, so work that arrives during the look still wakes this claim.
      this.waiters.add(waiter);
      const grant = await this.tryClaim(req, cost);
      if (grant || waiter.ended) {
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
      if (waiter.ended || Date.now() >= deadline) return answer(null);
    }
  }

  /**
   * A stopping runner ends the claim it leaves waiting (POST /v1/runners/claim/cancel), so no run
   * is handed to an answer no one reads. Answers how many claims it ended.
   */
  async cancelClaims(orgId: string, machineId: string): Promise<number> {
    return this.endWaiting(orgId, machineId, "its runner is stopping");
  }

  /**
   * Ends the machine's waiting claims (204), handed no work. A runner waits on one claim at a time
   * (docs/protocol.md, "Runner protocol"), so a machine's new claim means the one still waiting
   * lost its runner (a listener restarted, or a connection dropped and the claim was sent again);
   * a stopping runner says so itself. Work that arrives then goes to a claim whose runner is there
   * to take it, not to an answer no one reads (the run would sit claimed until its lease lapsed).
   * A claim in the middle of a look at the queue finishes it, and waits no more.
   */
  private endWaiting(orgId: string, machineId: string, why: string): number {
    let ended = 0;
    for (const waiter of this.waiters) {
      if (waiter.machineId !== machineId || waiter.ended) continue;
      waiter.ended = true;
      waiter.wake();
      ended += 1;
    }
    if (ended > 0) log("scheduler.claim_ended", { org: orgId, machine: machineId, count: ended, reason: `${why}: its waiting claim ends without work` });
    return ended;
  }

  /**
   * An admin deregistered the machine (its D1 row is written first): its token is no longer taken
   * as verified, its waiting claims end now, and a claim whose credentials were checked just before
   * gets no work either, so no run is handed to a machine its organization removed
   * (docs/protocol.md, "Runners"). Remembered for one claim wait (CLAIM_WAIT_MS).
   */
  async forgetMachine(machineId: string): Promise<void> {
    this.credentials.forget(machineId);
    const now = Date.now();
    for (const [id, atMs] of this.deregistered) if (atMs <= now - this.config.claimWaitMs) this.deregistered.delete(id);
    this.deregistered.set(machineId, now);
    for (const waiter of this.waiters) if (waiter.machineId === machineId) waiter.wake();
  }

  /** A heartbeat set the machine's labels: its next claim reads them (its claims waiting now keep theirs). */
  async machineChanged(machineId: string): Promise<void> {
    this.credentials.forget(machineId);
  }

  /** Called by a run object when its run becomes claimable. */
  async notifyWork(key: string): Promise<void> {
    this.notifications += 1;
    this.dropAhead();
    if (this.labelSetCache && !this.labelSetCache.keys.has(key)) this.labelSetCache = null;
    for (const waiter of this.waiters) {
      if (covers(key, waiter.labels, waiter.protocols)) waiter.wake();
    }
  }

  async readStats() {
    return { ...this.stats, cost: { ...this.stats.cost }, waiters: this.waiters.size, closedVerdicts: this.gates.closedVerdictsComputed };
  }

  private async knownLabelSets(orgId: string, cost: Cost): Promise<LabelSetCache> {
    const cache = this.labelSetCache;
    if (cache && cache.orgId === orgId && Date.now() - cache.readAtMs < this.config.labelSetsTtlMs) return cache;
    // Concurrent claims share one read; the claim that started it pays its rows.
    if (!this.labelSetRead) {
      this.labelSetRead = this.readLabelSets(orgId, cost).finally(() => (this.labelSetRead = null));
    }
    return this.labelSetRead;
  }

  private async readLabelSets(orgId: string, cost: Cost): Promise<LabelSetCache> {
    const now = Date.now();
    // label_sets holds only sets with queued work (and some just drained); the read is bounded all the same.
    const statement = this.env.DB.prepare("SELECT labels_key FROM label_sets WHERE org_id = ? ORDER BY labels_key LIMIT ?").bind(
      orgId,
      this.config.labelSetsReadMax,
    );
    const rows = await countedAll<{ labels_key: string }>(cost, statement);
    const cache: LabelSetCache = { orgId, keys: new Set(rows.map((r) => r.labels_key)), readAtMs: now, kept: new Set(), covered: new Map() };
    this.labelSetCache = cache;
    return cache;
  }

  /** The known label sets a machine covers, from the per-signature cache when it has them. */
  private async coveredLabelSets(req: Claimant, cost: Cost): Promise<string[]> {
    const cache = await this.knownLabelSets(req.orgId, cost);
    const signature = `${req.labels.join(",")}|${req.protocols.join(",")}`;
    let covered = cache.covered.get(signature);
    if (!covered) {
      covered = [...cache.keys].filter((k) => covers(k, req.labels, req.protocols));
      // Bounded like the label sets themselves: distinct machine signatures are few in practice.
      if (cache.covered.size >= this.config.labelSetsReadMax) cache.covered.clear();
      cache.covered.set(signature, covered);
    }
    return covered;
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
    cache.covered.clear();
    log("scheduler.label_sets_forgotten", { org: orgId, count: results.filter((r) => r.meta.changes > 0).length, kept: cache.kept.size, reason: "no queued work left" });
  }

  /**
   * Reads the heads of the queues the machine can serve, only as many rows as this claim can use
   * (one, plus those other claims are asking, plus those it was refused), and asks the best
   * candidate's run object for the claim; a refusal moves on to the next. A round whose rows were
   * all taken by other claims reads again, further. Adds what it cost to `cost`.
   */
  private async tryClaim(req: Claimant, cost: Cost): Promise<ClaimGrant | null> {
    const keys = this.claimWindow(await this.coveredLabelSets(req, cost));
    if (keys.length === 0) return null;
    const refused = new Set<string>();
    // A candidate this claim may ask: not refused to it, not asked by another claim since the read.
    const usable = (c: Candidate, readSeq: number) => !refused.has(c.id) && !this.busy(c.id, readSeq);
    let emptyKeys: string[] | null = null;
    let slack = 0;
    let asked = 0;
    // Bounded: at most claimCandidatesMax run objects asked, and as many rounds.
    for (let round = 0; round < this.config.claimCandidatesMax && asked < this.config.claimCandidatesMax; round++) {
      const heads = await this.readHeads(req.orgId, keys, refused.size + slack, usable, cost);
      emptyKeys ??= heads.emptyKeys;
      try {
        for (const candidate of heads.candidates) {
          if (!usable(candidate, heads.seq)) continue;
          if (asked >= this.config.claimCandidatesMax) break;
          asked += 1;
          const grant = await this.ask(req.orgId, candidate, req.machineId, cost);
          if (grant) return grant;
          refused.add(candidate.id);
        }
      } finally {
        this.closeRead(heads.seq);
      }
      if (!heads.full) break;
      // Every row this round read was taken meanwhile: read further, up to the candidate bound more.
      slack = Math.min(Math.max(1, slack * 2), this.config.claimCandidatesMax);
    }
    // Only a claim that found nothing pays for the removal: a grant goes back at once.
    await this.forgetEmpty(req.orgId, emptyKeys ?? [], cost);
    return null;
  }

  /**
   * The head of each set in `keys`, for this claim and every other claim that asks meanwhile: one
   * read of a window at a time, and the claims that arrive while it is under way share the next, so
   * a burst of claims reads the heads once instead of once each, and they share its rows in their
   * costs. A claim that finds a `usable` row in the read kept ahead (keepAhead) takes that read
   * instead, without a read or rows of its own. Every claim must closeRead() the answer.
   */
  private async readHeads(orgId: string, keys: string[], extra: number, usable: (c: Candidate, seq: number) => boolean, cost: Cost): Promise<Heads> {
    const window = keys.join("\n");
    this.expireAhead(Date.now());
    const kept = this.ahead.get(window)?.heads;
    // Rows read ahead that no claim has taken yet serve this claim without a read of its own.
    if (kept && kept.candidates.some((c) => usable(c, kept.seq))) {
      this.openReads.set(kept.seq, (this.openReads.get(kept.seq) ?? 0) + 1);
      return kept;
    }
    let next = this.nextReads.get(window);
    if (!next) {
      // Claims join until the read starts; `heads` is set just below.
      const pending = { claims: 0, extra: 0 } as PendingRead;
      const previous = this.readTails.get(window) ?? Promise.resolve();
      pending.heads = previous.then(() => {
        this.nextReads.delete(window);
        return this.readHeadsNow(orgId, keys, pending);
      });
      const tail = pending.heads.then(
        () => undefined,
        () => undefined,
      );
      this.readTails.set(window, tail);
      void tail.then(() => {
        if (this.readTails.get(window) === tail) this.readTails.delete(window);
      });
      this.nextReads.set(window, pending);
      next = pending;
    }
    const share = next.claims;
    next.claims += 1;
    next.extra = Math.max(next.extra, extra);
    const heads = await next.heads;
    // Claim number `share` of `claims` pays its part of the rows, the first ones a row more.
    const rows = heads.rowsRead;
    cost.d1RowsRead += Math.floor(rows / heads.claims) + (share < rows % heads.claims ? 1 : 0);
    return heads;
  }

  /**
   * One batch: the head of each set, one row for each claim sharing the read (plus the most any of
   * them was refused) and one for each candidate of that set another claim is asking (its row is
   * still queued in D1 until its run object answers). One claim at a time reads 1 row per set.
   */
  private async readHeadsNow(orgId: string, keys: string[], read: PendingRead): Promise<Heads> {
    const busyPerKey = new Map<string, number>();
    for (const key of this.inFlight.values()) busyPerKey.set(key, (busyPerKey.get(key) ?? 0) + 1);
    const ahead = Math.ceil(this.config.claimReadAhead / keys.length);
    const limits = keys.map((key) => read.claims + read.extra + ahead + (busyPerKey.get(key) ?? 0));
    const now = Date.now();
    const notifications = this.notifications;
    // Runs of autopilot projects whose gates are closed are left out, so they never crowd the head.
    const closed = this.gates.closedProjects(now, this.config.autopilotSchedulerClosedProjectsMax);
    const seq = ++this.seq;
    this.openReads.set(seq, read.claims);
    const cost = noCost();
    let rows: Omit<Candidate, "key">[][];
    try {
      rows = await countedBatch<Omit<Candidate, "key">>(cost, this.env.DB, keys.map((key, i) => this.queueHead(orgId, key, now, limits[i], closed)));
    } catch (err) {
      this.openReads.delete(seq);
      throw err;
    }
    const sets = rows.map((set, i) => set.map((row) => ({ ...row, key: keys[i] })));
    // A set read to its limit may hold more behind its last row, so nothing after that row (in
    // queue order) is a candidate this round: a later round reads further instead.
    const lasts = sets.filter((set, i) => set.length >= limits[i]).map((set) => set[set.length - 1]);
    const horizon = lasts.sort(queueOrder)[0];
    const candidates = sets
      .flat()
      .filter((c) => (!horizon || queueOrder(c, horizon) <= 0) && this.notClosed(c))
      .sort(queueOrder);
    const heads = { candidates, seq, claims: read.claims, rowsRead: cost.d1RowsRead, emptyKeys: keys.filter((_k, i) => rows[i].length === 0), full: lasts.length > 0 };
    // Kept for the claims that follow, unless new work arrived while it was read (it may be missing).
    if (ahead > 0 && notifications === this.notifications) this.keepAhead(keys.join("\n"), { heads, atMs: now });
    return heads;
  }

  /** Keeps a head read for later claims, in place of the window's previous one; it holds its read open. */
  private keepAhead(window: string, kept: { heads: Heads; atMs: number }): void {
    const previous = this.ahead.get(window);
    // Bounded like the label sets: windows are few (one per machine signature and rotation).
    if (!previous && this.ahead.size >= this.config.labelSetsReadMax) this.dropAhead();
    this.ahead.set(window, kept);
    this.openReads.set(kept.heads.seq, (this.openReads.get(kept.heads.seq) ?? 0) + 1);
    if (previous) this.closeRead(previous.heads.seq);
  }

  /** Reads kept longer than CLAIM_READ_AHEAD_TTL_MS are let go (and their read closed). */
  private expireAhead(now: number): void {
    for (const [window, kept] of this.ahead) {
      if (now - kept.atMs < this.config.claimReadAheadTtlMs) continue;
      this.ahead.delete(window);
      this.closeRead(kept.heads.seq);
    }
  }

  /** New work or a gate change: the rows read ahead may miss it, so later claims read again. */
  private dropAhead(): void {
    const kept = [...this.ahead.values()];
    this.ahead.clear();
    for (const k of kept) this.closeRead(k.heads.seq);
  }

  /** One label set's head, without the runs of the closed projects. */
  private queueHead(orgId: string, key: string, now: number, limit: number, closed: string[]): D1PreparedStatement {
    return closed.length === 0
      ? this.env.DB.prepare(QUEUE_HEAD_SQL).bind(orgId, key, now, limit)
      : this.env.DB.prepare(GATED_QUEUE_HEAD_SQL).bind(orgId, key, now, JSON.stringify(closed), limit);
  }

  /**
   * A run of a closed project that the read did not leave out (there were more closed projects than
   * AUTOPILOT_SCHEDULER_CLOSED_PROJECTS_MAX) is no candidate, and the next read leaves its project out.
   */
  private notClosed(c: Omit<Candidate, "key">): boolean {
    if (!c.project_id || !this.gates.isClosed(c.project_id)) return true;
    this.gates.crowding(c.project_id);
    return false;
  }

  /** Another claim is asking this candidate, or its ask ended after this read started. */
  private busy(id: string, readSeq: number): boolean {
    return this.inFlight.has(id) || (this.settled.get(id) ?? 0) > readSeq;
  }

  /** A claim no longer looks at a read's candidates: forget the settled asks no open read can list. */
  private closeRead(seq: number): void {
    const left = (this.openReads.get(seq) ?? 1) - 1;
    if (left > 0) this.openReads.set(seq, left);
    else this.openReads.delete(seq);
    const oldest = Math.min(...this.openReads.keys());
    for (const [id, at] of this.settled) if (at < oldest) this.settled.delete(id);
  }

  /** Asks one candidate's run object for the claim, holding the candidate in flight meanwhile. */
  private async ask(orgId: string, candidate: Candidate, machineId: string, cost: Cost): Promise<ClaimGrant | null> {
    // The caller checked busy() with no await since: a second ask of one run object would be a bug here.
    if (this.inFlight.has(candidate.id)) throw new Error(`scheduler invariant: run ${candidate.id} asked by two claims at once`);
    this.inFlight.set(candidate.id, candidate.key);
    let failed = true;
    // The claim starts this attempt: its slot is taken for it, and the run object grants only it.
    const attempt = candidate.attempt + 1;
    try {
      // Every gate of the candidate's project, checked and its slot taken in one synchronous step.
      const admitted = this.gates.admit(orgId, { id: candidate.id, project_id: candidate.project_id, attempt }, Date.now());
      if (!admitted.ok) {
        failed = false;
        log("scheduler.gate_closed", { org: orgId, run_id: candidate.id, project: admitted.projectId, gate: admitted.gate, reason: admitted.reason });
        return null;
      }
      // Armed before anything can fail or reset: a slot whose claim never answers is still checked.
      if (admitted.projectId) await this.armBackstop();
      if (!(await this.reserveBudget(orgId, candidate.id, attempt, admitted))) {
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
      await this.undoAdmission(orgId, candidate.id, attempt, admitted);
      // A stale queue row: the run object logged run.claim_refused and repaired the row; a row
      // without a run object has no attempt to name.
      if (answer.error.code === "not_found") log("scheduler.orphan_row", { run_id: candidate.id, reason: answer.error.message });
      return null;
    } finally {
      this.inFlight.delete(candidate.id);
      this.settled.set(candidate.id, ++this.seq);
      // The ask failed before an answer: the run may still be claimable, and claims that looked past it wait.
      if (failed) void this.notifyWork(candidate.key);
    }
  }

  // ---- autopilot scheduler gates (docs/protocol.md, "Autopilot scheduler") ----------------------

  /**
   * Takes the run's model-spend reservation from the organization's credit when its admission took
   * a new budget hold; short credit gives the slot and the hold back and the claim moves on.
   */
  private async reserveBudget(orgId: string, runId: string, attempt: number, admitted: Extract<Admission, { ok: true }>): Promise<boolean> {
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
  private async undoAdmission(orgId: string, runId: string, attempt: number, admitted: Extract<Admission, { ok: true }>): Promise<void> {
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
      verdicts: this.verdicts(projectId, now),
      admission: admissionRefusal(gates),
    };
  }

  /** Changes the project's gates; the slots it now holds are answered for the caller to pause. */
  async changeGates(projectId: string, change: GatesChange): Promise<SchedulerView> {
    this.gates.change(projectId, change, Date.now());
    this.dropAhead();
    // Opening a gate may make queued work claimable: wake every waiting claim to look again.
    for (const waiter of this.waiters) waiter.wake();
    return this.schedulerView(projectId);
  }

  /** The first of the project's gates that holds the run back now, or null when all are open (GET /v1/runs/:id, "waiting"). */
  async closedGate(projectId: string, runId: string): Promise<GateVerdict | null> {
    const holdsSlot = this.gates.slotHolders(projectId, this.config.autopilotSchedulerConcurrencyMax).some((s) => s.run_id === runId);
    if (holdsSlot) return null;
    return firstClosed(this.verdicts(projectId, Date.now()));
  }

  /** The gates' verdicts, the budget's closed while the organization's credit last fell short of a reservation. */
  private verdicts(projectId: string, nowMs: number): GateVerdict[] {
    const short = this.creditShort.get(projectId);
    const verdicts = this.gates.verdicts(projectId, nowMs);
    return short ? verdicts.map((v) => (v.gate === "budget" && v.open ? short : v)) : verdicts;
  }

  /** Why the project's admission of new tickets is refused now (TicketObject), or null. */
  async admissionRefusal(projectId: string): Promise<string | null> {
    return admissionRefusal(this.gates.read(projectId));
  }

  /** A run object's attempt left the slot-holding states: that attempt's slot goes back and waiting claims look again. */
  async releaseSlot(runId: string, attempt: number): Promise<boolean> {
    const released = this.gates.release(runId, attempt);
    if (released) {
      this.dropAhead();
      for (const waiter of this.waiters) waiter.wake();
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

  private async armBackstop(): Promise<void> {
    if ((await this.ctx.storage.getAlarm()) === null) await this.ctx.storage.setAlarm(Date.now() + this.config.autopilotSchedulerSlotCheckMs);
  }

  /**
   * The slot backstop: a bounded batch of slot holders, oldest checked first, is compared with its
   * run objects; a slot whose attempt no longer executes (a release call that was lost) or never
   * started (a claim whose answer was lost, or a reset before the run object was asked) goes back.
   * A disabled project's holder that started executing since is asked to pause.
   */
  async checkSlots(): Promise<{ checked: number; released: string[] }> {
    const now = Date.now();
    const rows = this.gates.oldestChecked(this.config.autopilotSchedulerSlotCheckMax, now);
    const released: string[] = [];
    for (const row of rows) {
      const stub = this.env.RUN.get(this.env.RUN.idFromName(row.run_id));
      try {
        const run = await stub.read(row.org_id);
        const verdict = slotVerdict(row, isRefusal(run) ? null : run, now - this.config.autopilotSchedulerSlotCheckMs, this.inFlight.has(row.run_id));
        if (verdict === "free") {
          if (await this.releaseSlot(row.run_id, row.attempt)) released.push(row.run_id);
        } else if (verdict === "executing" && !isRefusal(run) && run.state === "implementing" && !this.gates.read(row.project_id).enabled) {
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

/** Why a reservation was not held, as the run's `waiting` and the log say it. */
const BUDGET_REFUSALS: Readonly<Record<"insufficient_credit" | "ended" | "failed", (cents: number) => string>> = {
  insufficient_credit: (cents) => `the organization's available credit is short of the per-run reservation (${cents} cents): grant credit (POST /v1/credits/grants)`,
  ended: () => "the run's reservation was settled: its run has ended",
  failed: () => "the reservation could not be written",
};

/**
 * A slot against its run as the run object tells it: `executing` (its attempt holds it), `free`
 * (that attempt ended, or its claim never reached the run object and is older than `staleBeforeMs`
 * with no ask under way here), or `wait` (its claim may still be on its way). Attempt 0: a slot
 * taken before slots had attempts, judged by the run's state alone.
 */
export function slotVerdict(slot: SlotRow, run: { state: string; attempt: number } | null, staleBeforeMs: number, asking: boolean): "executing" | "free" | "wait" {
  if (run === null) return "free";
  const attempt = slot.attempt === 0 ? run.attempt : slot.attempt;
  if (run.attempt > attempt) return "free";
  if (run.attempt === attempt) return SLOT_STATES.has(run.state) ? "executing" : "free";
  return asking || slot.taken_at_ms > staleBeforeMs ? "wait" : "free";
}

/** Queue order: the order of the runs_queue index, across label sets. */
function queueOrder(a: Candidate, b: Candidate): number {
  return (
    a.order_group - b.order_group ||
    a.order_priority - b.order_priority ||
    a.queued_at_ms - b.queued_at_ms ||
    (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
  );
}
