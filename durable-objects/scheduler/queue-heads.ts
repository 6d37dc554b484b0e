// The queue heads a claim picks from, and the asks under way (../shared/spec/run-lifecycle.md,
// "Queue and dispatch"). Claims run concurrently: a burst shares one read of a window's heads, a
// read is kept ahead (CLAIM_READ_AHEAD) for the claims that follow, and every candidate a claim is
// asking is known here, so no run object is asked by two claims at once and no claim takes a row
// whose ask ended after its read began. In memory only: SchedulerObject lists why losing it is safe.

import type { Config } from "../../src/config";
import { countedBatch, noCost, type Cost } from "../../src/lib/cost";
import type { SchedulerGates } from "../scheduler-gates";

export interface Candidate {
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
export interface Heads {
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

export class QueueHeads {
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
  private seq = 0;
  /** workArrived calls so far: a read that overlapped one is not kept ahead (it may miss the work). */
  private arrivals = 0;

  constructor(
    private readonly db: D1Database,
    private readonly config: () => Config,
    private readonly gates: SchedulerGates,
  ) {}

  /**
   * The head of each set in `keys`, for this claim and every other claim that asks meanwhile: one
   * read of a window at a time, and the claims that arrive while it is under way share the next, so
   * a burst of claims reads the heads once instead of once each, and they share its rows in their
   * costs. A claim that finds a `usable` row in the read kept ahead (keepAhead) takes that read
   * instead, without a read or rows of its own. Every claim must close() the answer.
   */
  async read(orgId: string, keys: string[], extra: number, usable: (c: Candidate, seq: number) => boolean, cost: Cost): Promise<Heads> {
    const window = keys.join("\n");
    this.expireAhead(Date.now());
    const kept = this.ahead.get(window)?.heads;
    // Rows read ahead that no claim has taken yet serve this claim without a read of its own.
    if (kept && kept.candidates.some((c) => usable(c, kept.seq))) {
      this.openReads.set(kept.seq, (this.openReads.get(kept.seq) ?? 0) + 1);
      return kept;
    }
    const next = this.nextReads.get(window) ?? this.queueRead(orgId, keys, window);
    const share = next.claims;
    next.claims += 1;
    next.extra = Math.max(next.extra, extra);
    const heads = await next.heads;
    // Claim number `share` of `claims` pays its part of the rows, the first ones a row more.
    const rows = heads.rowsRead;
    cost.d1RowsRead += Math.floor(rows / heads.claims) + (share < rows % heads.claims ? 1 : 0);
    return heads;
  }

  /** The window's next read, started once the one under way ends; claims join it until then. */
  private queueRead(orgId: string, keys: string[], window: string): PendingRead {
    // Claims join until the read starts; `heads` is set just below.
    const pending = { claims: 0, extra: 0 } as PendingRead;
    const previous = this.readTails.get(window) ?? Promise.resolve();
    pending.heads = previous.then(() => {
      this.nextReads.delete(window);
      return this.readNow(orgId, keys, pending);
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
    return pending;
  }

  /**
   * One batch: the head of each set, one row for each claim sharing the read (plus the most any of
   * them was refused) and one for each candidate of that set another claim is asking (its row is
   * still queued in D1 until its run object answers). One claim at a time reads 1 row per set.
   */
  private async readNow(orgId: string, keys: string[], read: PendingRead): Promise<Heads> {
    const busyPerKey = new Map<string, number>();
    for (const key of this.inFlight.values()) busyPerKey.set(key, (busyPerKey.get(key) ?? 0) + 1);
    const ahead = Math.ceil(this.config().claimReadAhead / keys.length);
    const limits = keys.map((key) => read.claims + read.extra + ahead + (busyPerKey.get(key) ?? 0));
    const now = Date.now();
    const arrivals = this.arrivals;
    // Runs of autopilot projects whose gates are closed are left out, so they never crowd the head.
    const closed = this.gates.closedProjects(now, this.config().autopilotSchedulerClosedProjectsMax);
    const seq = ++this.seq;
    this.openReads.set(seq, read.claims);
    const cost = noCost();
    let rows: Omit<Candidate, "key">[][];
    try {
      rows = await countedBatch<Omit<Candidate, "key">>(cost, this.db, keys.map((key, i) => this.queueHead(orgId, key, now, limits[i], closed)));
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
    if (ahead > 0 && arrivals === this.arrivals) this.keepAhead(keys.join("\n"), { heads, atMs: now });
    return heads;
  }

  /** Keeps a head read for later claims, in place of the window's previous one; it holds its read open. */
  private keepAhead(window: string, kept: { heads: Heads; atMs: number }): void {
    const previous = this.ahead.get(window);
    // Bounded like the label sets: windows are few (one per machine signature and rotation).
    if (!previous && this.ahead.size >= this.config().labelSetsReadMax) this.dropAhead();
    this.ahead.set(window, kept);
    this.openReads.set(kept.heads.seq, (this.openReads.get(kept.heads.seq) ?? 0) + 1);
    if (previous) this.close(previous.heads.seq);
  }

  /** Reads kept longer than CLAIM_READ_AHEAD_TTL_MS are let go (and their read closed). */
  private expireAhead(now: number): void {
    for (const [window, kept] of this.ahead) {
      if (now - kept.atMs < this.config().claimReadAheadTtlMs) continue;
      this.ahead.delete(window);
      this.close(kept.heads.seq);
    }
  }

  /** New work, a gate change or a slot given back: the rows read ahead may miss it, so later claims read again. */
  dropAhead(): void {
    const kept = [...this.ahead.values()];
    this.ahead.clear();
    for (const k of kept) this.close(k.heads.seq);
  }

  /** Work arrived: reads kept ahead, and the reads under way, may miss it. */
  workArrived(): void {
    this.arrivals += 1;
    this.dropAhead();
  }

  /** One label set's head, without the runs of the closed projects. */
  private queueHead(orgId: string, key: string, now: number, limit: number, closed: string[]): D1PreparedStatement {
    return closed.length === 0
      ? this.db.prepare(QUEUE_HEAD_SQL).bind(orgId, key, now, limit)
      : this.db.prepare(GATED_QUEUE_HEAD_SQL).bind(orgId, key, now, JSON.stringify(closed), limit);
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
  busy(id: string, readSeq: number): boolean {
    return this.inFlight.has(id) || (this.settled.get(id) ?? 0) > readSeq;
  }

  /** A claim no longer looks at a read's candidates: forget the settled asks no open read can list. */
  close(seq: number): void {
    const left = (this.openReads.get(seq) ?? 1) - 1;
    if (left > 0) this.openReads.set(seq, left);
    else this.openReads.delete(seq);
    const oldest = Math.min(...this.openReads.keys());
    for (const [id, at] of this.settled) if (at < oldest) this.settled.delete(id);
  }

  /** A claim starts asking the candidate's run object; the caller checked busy() with no await since. */
  startAsk(candidate: Candidate): void {
    // A second ask of one run object would be a bug here.
    if (this.inFlight.has(candidate.id)) throw new Error(`scheduler invariant: run ${candidate.id} asked by two claims at once`);
    this.inFlight.set(candidate.id, candidate.key);
  }

  /** The ask ended: reads that started before now may still list the candidate as queued. */
  endAsk(candidate: Candidate): void {
    this.inFlight.delete(candidate.id);
    this.settled.set(candidate.id, ++this.seq);
  }

  /** Whether a claim is asking the run's object right now (the slot backstop waits for it). */
  isAsking(runId: string): boolean {
    return this.inFlight.has(runId);
  }
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
