// SchedulerObject: one per organization. Claims are serialized here so a queued run is handed to
// one machine per attempt, and long-poll waiters are woken the moment matching work arrives
// (../shared/DESIGN.md, "Claims are serialized per organization"; ../shared/spec/run-lifecycle.md,
// "Queue and dispatch": claiming a slot and recording dispatch must be serialized).

import { DurableObject } from "cloudflare:workers";
import { and, asc, eq, lte } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { loadConfig, type Config } from "../src/config";
import { labelSets, runs } from "../src/db/schema";
import type { Env } from "../src/env";
import { isRefusal, type Refusal } from "../src/errors";
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

interface Candidate {
  id: string;
  orderGroup: number;
  orderPriority: number;
  queuedAtMs: number;
}

/** How long the known label sets are trusted before they are read again from D1. */
const LABEL_SETS_TTL_MS = 5_000;

export class SchedulerObject extends DurableObject<Env> {
  private readonly config: Config;
  private readonly waiters = new Set<Waiter>();
  private tail: Promise<unknown> = Promise.resolve();
  private labelSetCache: { orgId: string; keys: Set<string>; readAtMs: number } | null = null;
  /** Claims and their D1 reads, counted for benchmarks (GET /v1/admin/stats). */
  private stats = { claims: 0, granted: 0, d1Queries: 0, runObjectCalls: 0 };

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.config = loadConfig(env);
  }

  /** A long-poll claim: a grant as soon as matching work exists, or null after `waitMs`. */
  async claim(req: ClaimRequest): Promise<ClaimGrant | null> {
    const deadline = Date.now() + Math.min(req.waitMs, this.config.claimWaitMs);
    this.stats.claims += 1;
    // Each round is bounded by claimCandidatesMax; rounds are bounded by the deadline.
    for (;;) {
      let woken = false;
      const waiter: Waiter = { labels: req.labels, protocols: req.protocols, wake: () => (woken = true) };
      // Register before looking, so work that arrives during the look still wakes this claim.
      this.waiters.add(waiter);
      const grant = await this.serialized(() => this.tryClaim(req));
      if (grant) {
        this.waiters.delete(waiter);
        this.stats.granted += 1;
        return grant;
      }
      const remaining = deadline - Date.now();
      if (remaining <= 0 || this.waiters.size > this.config.claimWaitersMax) {
        this.waiters.delete(waiter);
        return null;
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
      if (Date.now() >= deadline) return null;
    }
  }

  /** Called by a run object when its run becomes claimable. */
  async notifyWork(key: string): Promise<void> {
    if (this.labelSetCache && !this.labelSetCache.keys.has(key)) this.labelSetCache = null;
    for (const waiter of this.waiters) {
      if (covers(key, waiter.labels, waiter.protocols)) waiter.wake();
    }
  }

  async readStats() {
    return { ...this.stats, waiters: this.waiters.size };
  }

  private serialized<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.tail.then(fn, fn);
    this.tail = next.catch(() => undefined);
    return next;
  }

  private async knownLabelSets(orgId: string): Promise<Set<string>> {
    const now = Date.now();
    const cache = this.labelSetCache;
    if (cache && cache.orgId === orgId && now - cache.readAtMs < LABEL_SETS_TTL_MS) return cache.keys;
    this.stats.d1Queries += 1;
    const rows = await drizzle(this.env.DB).select({ key: labelSets.labelsKey }).from(labelSets).where(eq(labelSets.orgId, orgId));
    const keys = new Set(rows.map((r) => r.key));
    this.labelSetCache = { orgId, keys, readAtMs: now };
    return keys;
  }

  /**
   * Reads the head of each queue the machine can serve (one batch, a few rows each, whatever the
   * queue depth) and asks the best candidates' run objects for the claim.
   */
  private async tryClaim(req: ClaimRequest): Promise<ClaimGrant | null> {
    const keys = [...(await this.knownLabelSets(req.orgId))].filter((k) => covers(k, req.labels, req.protocols));
    if (keys.length === 0) return null;
    const db = drizzle(this.env.DB);
    const now = Date.now();
    const perKey = this.config.claimCandidatesMax;
    const queries = keys.map((key) =>
      db
        .select({ id: runs.id, orderGroup: runs.orderGroup, orderPriority: runs.orderPriority, queuedAtMs: runs.queuedAtMs })
        .from(runs)
        .where(and(eq(runs.orgId, req.orgId), eq(runs.labelsKey, key), eq(runs.state, "queued"), lte(runs.notBeforeMs, now)))
        .orderBy(asc(runs.orderGroup), asc(runs.orderPriority), asc(runs.queuedAtMs), asc(runs.id))
        .limit(perKey),
    );
    this.stats.d1Queries += 1;
    const results = (await db.batch(queries as [(typeof queries)[0], ...typeof queries])) as Candidate[][];
    const candidates = results
      .flat()
      .sort(
        (a, b) =>
          a.orderGroup - b.orderGroup ||
          a.orderPriority - b.orderPriority ||
          a.queuedAtMs - b.queuedAtMs ||
          (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
      )
      .slice(0, this.config.claimCandidatesMax);
    for (const candidate of candidates) {
      this.stats.runObjectCalls += 1;
      const stub = this.env.RUN.get(this.env.RUN.idFromName(candidate.id));
      const answer: ClaimGrant | Refusal = await stub.claim(req.machineId);
      if (!isRefusal(answer)) return answer;
      log("scheduler.stale_row", { run: candidate.id, code: answer.error.code, message: answer.error.message });
    }
    return null;
  }
}

