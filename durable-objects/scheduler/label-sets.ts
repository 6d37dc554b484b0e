// Which label sets a claim reads the queue heads of (../shared/DESIGN.md, "Claims are serialized
// per organization": runs are projected under their required-label set, and a claim reads only the
// sets its machine covers). The known sets are read from D1 (label_sets) and cached briefly; a set
// whose queue holds nothing queued is forgotten, so later claims stop reading it.

import type { Config } from "../../src/config";
import { addD1, countedAll, type Cost } from "../../src/lib/cost";
import { log } from "../../src/lib/log";
import { covers } from "../../src/run/labels";

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

/** The claimant once its credentials are checked. */
export interface Claimant {
  orgId: string;
  machineId: string;
  labels: string[];
  protocols: string[];
}

export class LabelSets {
  private cache: LabelSetCache | null = null;
  /** The label-set read under way, shared by the claims that need it meanwhile. */
  private reading: Promise<LabelSetCache> | null = null;
  /** workArrived calls so far: a removal that overlapped one keeps its set (forgetEmpty). */
  private arrivals = 0;
  /** Where the next claim's window of label sets starts, when a runner covers more than fit in one. */
  private rotation = 0;

  constructor(
    private readonly db: D1Database,
    private readonly config: () => Config,
  ) {}

  /**
   * The label sets whose heads this claim reads: all the machine covers, or, when they are more than
   * claimLabelSetsMax, a window that moves on with every claim so each set gets its turn.
   */
  async window(req: Claimant, cost: Cost): Promise<string[]> {
    const covered = await this.covered(req, cost);
    const max = this.config().claimLabelSetsMax;
    if (covered.length <= max) return covered;
    const start = this.rotation % covered.length;
    this.rotation = (start + max) % covered.length;
    return [...covered.slice(start), ...covered.slice(0, start)].slice(0, max);
  }

  /** Work of label set `key` arrived: a cached list without it is read again. */
  workArrived(key: string): void {
    this.arrivals += 1;
    if (this.cache && !this.cache.keys.has(key)) this.cache = null;
  }

  private async known(orgId: string, cost: Cost): Promise<LabelSetCache> {
    const cache = this.cache;
    if (cache && cache.orgId === orgId && Date.now() - cache.readAtMs < this.config().labelSetsTtlMs) return cache;
    // Concurrent claims share one read; the claim that started it pays its rows.
    if (!this.reading) {
      this.reading = this.read(orgId, cost).finally(() => (this.reading = null));
    }
    return this.reading;
  }

  private async read(orgId: string, cost: Cost): Promise<LabelSetCache> {
    const now = Date.now();
    // label_sets holds only sets with queued work (and some just drained); the read is bounded all the same.
    const statement = this.db.prepare("SELECT labels_key FROM label_sets WHERE org_id = ? ORDER BY labels_key LIMIT ?").bind(orgId, this.config().labelSetsReadMax);
    const rows = await countedAll<{ labels_key: string }>(cost, statement);
    const cache: LabelSetCache = { orgId, keys: new Set(rows.map((r) => r.labels_key)), readAtMs: now, kept: new Set(), covered: new Map() };
    this.cache = cache;
    return cache;
  }

  /** The known label sets a machine covers, from the per-signature cache when it has them. */
  private async covered(req: Claimant, cost: Cost): Promise<string[]> {
    const cache = await this.known(req.orgId, cost);
    const signature = `${req.labels.join(",")}|${req.protocols.join(",")}`;
    let covered = cache.covered.get(signature);
    if (!covered) {
      covered = [...cache.keys].filter((k) => covers(k, req.labels, req.protocols));
      // Bounded like the label sets themselves: distinct machine signatures are few in practice.
      if (cache.covered.size >= this.config().labelSetsReadMax) cache.covered.clear();
      cache.covered.set(signature, covered);
    }
    return covered;
  }

  /**
   * Removes the sets whose head read found nothing claimable and that hold no queued run at all, so
   * later claims stop reading them. A set that still holds runs in backoff is kept and not tried
   * again until the list is read again; work arriving during the removal drops the cached list.
   */
  async forgetEmpty(orgId: string, emptyKeys: string[], cost: Cost): Promise<void> {
    const cache = this.cache;
    if (!cache || cache.orgId !== orgId) return;
    const keys = emptyKeys.filter((k) => !cache.kept.has(k));
    if (keys.length === 0) return;
    const seen = this.arrivals;
    let results: D1Result[];
    try {
      results = await this.db.batch(keys.map((k) => this.db.prepare(FORGET_LABEL_SET_SQL).bind(orgId, k)));
    } catch (err) {
      // Only a saving: the claim's answer stands, and a later empty claim tries again.
      log("scheduler.label_sets_forget_failed", { org: orgId, count: keys.length, reason: String(err) });
      return;
    }
    for (const result of results) addD1(cost, result.meta);
    if (this.arrivals !== seen || this.cache !== cache) {
      this.cache = null;
      return;
    }
    keys.forEach((key, i) => {
      if (results[i].meta.changes > 0) cache.keys.delete(key);
      else cache.kept.add(key);
    });
    cache.covered.clear();
    log("scheduler.label_sets_forgotten", { org: orgId, count: results.filter((r) => r.meta.changes > 0).length, kept: cache.kept.size, reason: "no queued work left" });
  }
}
