// The credit ledger: balances, entries, grants and the audit that recomputes everything from the
// append-only entries (../shared/DESIGN.md, invariant 5: available + held + spent = granted).

import { and, count, desc, eq, inArray, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { buildJobs, creditBalances, ledgerEntries, LEDGER_KINDS, runReservations, type LedgerKind } from "../db/ledger-schema";
import { DocketError } from "../errors";
import type { CreditAudit, CreditEntry } from "../protocol/credits";
import { newId } from "../lib/crypto";
import { log } from "../lib/log";
import { pastSeq, seqPageOf } from "../lib/pagination";
import { applyOp, ENTRY_EFFECT, ensureBalance, insertGrant } from "./entries";

export interface Balance {
  granted_cents: number;
  available_cents: number;
  held_cents: number;
  spent_cents: number;
}

function balanceOf(totals: { granted: number; held: number; spent: number }): Balance {
  const available = totals.granted - totals.held - totals.spent;
  // An assertion of the invariant in the code, not only in tests (../shared/STYLE.md).
  if (available < 0 || totals.held < 0 || totals.spent < 0) {
    throw new Error(`ledger identity broken: granted ${totals.granted}, held ${totals.held}, spent ${totals.spent}`);
  }
  return { granted_cents: totals.granted, available_cents: available, held_cents: totals.held, spent_cents: totals.spent };
}

export async function readBalance(db: D1Database, orgId: string): Promise<Balance> {
  const row = await drizzle(db).select().from(creditBalances).where(eq(creditBalances.orgId, orgId)).get();
  return balanceOf({ granted: row?.grantedCents ?? 0, held: row?.heldCents ?? 0, spent: row?.spentCents ?? 0 });
}

export function entryView(e: typeof ledgerEntries.$inferSelect): CreditEntry {
  return {
    seq: e.seq,
    id: e.id,
    kind: e.kind,
    amount_cents: e.amountCents,
    job_id: e.jobId,
    request_id: e.requestId,
    run_id: e.runId ?? null,
    actor: e.actor,
    note: e.note,
    created_at_ms: e.createdAtMs,
  };
}

/** Entries newest first; `cursor` (a previous page's next_cursor, a seq) pages back. */
export async function listEntries(db: D1Database, orgId: string, opts: { cursor?: string; limit: number; jobId?: string }) {
  const conditions = [eq(ledgerEntries.orgId, orgId)];
  if (opts.cursor !== undefined) conditions.push(pastSeq(ledgerEntries.seq, opts.cursor, "newest"));
  if (opts.jobId !== undefined) conditions.push(eq(ledgerEntries.jobId, opts.jobId));
  const rows = await drizzle(db)
    .select()
    .from(ledgerEntries)
    .where(and(...conditions))
    .orderBy(desc(ledgerEntries.seq))
    .limit(opts.limit + 1);
  const { kept, next } = seqPageOf(rows, opts.limit);
  return { entries: kept.map(entryView), next_cursor: next };
}

/**
 * An admin's grant. With an external key, a repeated grant is granted once: the same key and
 * amount replays the first entry, another amount is idempotency_conflict.
 */
export async function grant(
  db: D1Database,
  input: { orgId: string; amountCents: number; actor: string; note: string | null; externalKey: string | null },
): Promise<{ entry: ReturnType<typeof entryView>; replayed: boolean }> {
  const nowMs = Date.now();
  const opId = newId("op");
  const id = newId("led");
  await db.batch([
    ensureBalance(db, input.orgId, nowMs),
    insertGrant(db, { id, orgId: input.orgId, opId, amountCents: input.amountCents, actor: input.actor, note: input.note, externalKey: input.externalKey, nowMs }),
    applyOp(db, input.orgId, opId, nowMs),
  ]);
  const d = drizzle(db);
  const written = await d.select().from(ledgerEntries).where(eq(ledgerEntries.id, id)).get();
  if (written) {
    log("ledger.grant", { org: input.orgId, entry: id, amount_cents: input.amountCents, actor: input.actor, reason: "credit granted" });
    return { entry: entryView(written), replayed: false };
  }
  const first = await d
    .select()
    .from(ledgerEntries)
    .where(and(eq(ledgerEntries.orgId, input.orgId), eq(ledgerEntries.externalKey, input.externalKey ?? "")))
    .get();
  if (!first) throw new DocketError("internal", "the grant was neither written nor found");
  if (first.amountCents !== input.amountCents || first.note !== input.note) {
    throw new DocketError("idempotency_conflict", "this Idempotency-Key was used for another grant", { entry_id: first.id });
  }
  return { entry: entryView(first), replayed: true };
}

export interface AuditProblem {
  what: string;
  job_id?: string;
  expected?: number;
  found?: number;
}

/**
 * Recomputes the organization's totals from its entries and every job's money from its own
 * entries, and compares both with what is stored. `ok` is the ledger identity check.
 */
export async function audit(db: D1Database, orgId: string): Promise<CreditAudit> {
  const orm = drizzle(db);
  const sums = await orm
    .select({ kind: ledgerEntries.kind, total: sql<number>`COALESCE(SUM(${ledgerEntries.amountCents}), 0)`, n: count() })
    .from(ledgerEntries)
    .where(eq(ledgerEntries.orgId, orgId))
    .groupBy(ledgerEntries.kind);
  const byKind = Object.fromEntries(LEDGER_KINDS.map((k) => [k, 0])) as Record<LedgerKind, number>;
  let entries = 0;
  for (const row of sums) {
    byKind[row.kind] = row.total;
    entries += row.n;
  }
  const derived = { granted: 0, held: 0, spent: 0 };
  for (const kind of LEDGER_KINDS) {
    derived.granted += ENTRY_EFFECT[kind].granted * byKind[kind];
    derived.held += ENTRY_EFFECT[kind].held * byKind[kind];
    derived.spent += ENTRY_EFFECT[kind].spent * byKind[kind];
  }
  const stored = await readBalance(db, orgId);
  const problems: AuditProblem[] = [];
  const compare = (what: string, expected: number, found: number) => {
    if (expected !== found) problems.push({ what, expected, found });
  };
  compare("granted_cents (entries vs balance)", derived.granted, stored.granted_cents);
  compare("held_cents (entries vs balance)", derived.held, stored.held_cents);
  compare("spent_cents (entries vs balance)", derived.spent, stored.spent_cents);
  const availableDerived = derived.granted - derived.held - derived.spent;
  if (availableDerived < 0) problems.push({ what: "available_cents is negative", found: availableDerived });

  // Every job: its stored money equals its own entries, and a held reservation has no settlement yet.
  const jobs = await jobsWithEntries(db, orgId);
  let heldByJobs = 0;
  for (const j of jobs) {
    const held = j.status !== "settled" && j.status !== "released";
    if (held) heldByJobs += j.reserve - j.settle - j.release_;
    const check = (what: string, expected: number, found: number) => {
      if (expected !== found) problems.push({ what, job_id: j.jobId, expected, found });
    };
    check("reserve entry vs reserved_cents", j.reservedCents, j.reserve);
    check("settle entries vs settled_cents", j.settledCents, j.settle);
    check("release entries vs released_cents", j.releasedCents, j.release_);
    check("charge entries vs charged_cents", j.chargedCents, j.charge);
    check(held ? "a held job has settled or released credit" : "a finished job's reservation is not fully settled and released", held ? 0 : j.reserve, j.settle + j.release_);
  }
  // Autopilot runs' model-spend reservations hold credit too (src/autopilot/run-budget.ts).
  const runs = await orm
    .select({ held: sql<number>`COALESCE(SUM(${runReservations.reservedCents}), 0)` })
    .from(runReservations)
    .where(and(eq(runReservations.orgId, orgId), inArray(runReservations.status, ["held", "cost_review", "reconcile"])))
    .get();
  compare("held_cents (held jobs vs balance)", heldByJobs + (runs?.held ?? 0), stored.held_cents);
  return {
    ok: problems.length === 0,
    identity: stored.available_cents + stored.held_cents + stored.spent_cents === stored.granted_cents,
    balance: stored,
    derived: { granted_cents: derived.granted, available_cents: availableDerived, held_cents: derived.held, spent_cents: derived.spent },
    entries,
    jobs: jobs.length,
    problems,
  };
}

/** The sum of a job's entries of one kind. */
function entriesOf(kind: LedgerKind) {
  return sql<number>`COALESCE(SUM(CASE ${ledgerEntries.kind} WHEN ${kind} THEN ${ledgerEntries.amountCents} END), 0)`;
}

/** Every job of the organization with its stored money and the sums of its own entries of each kind. */
function jobsWithEntries(db: D1Database, orgId: string) {
  return drizzle(db)
    .select({
      jobId: buildJobs.id,
      status: buildJobs.status,
      reservedCents: buildJobs.reservedCents,
      settledCents: buildJobs.settledCents,
      releasedCents: buildJobs.releasedCents,
      chargedCents: buildJobs.chargedCents,
      reserve: entriesOf("reserve"),
      settle: entriesOf("settle"),
      release_: entriesOf("release"),
      charge: entriesOf("charge"),
    })
    .from(buildJobs)
    .leftJoin(ledgerEntries, and(eq(ledgerEntries.orgId, buildJobs.orgId), eq(ledgerEntries.jobId, buildJobs.id)))
    .where(eq(buildJobs.orgId, orgId))
    .groupBy(buildJobs.id);
}
