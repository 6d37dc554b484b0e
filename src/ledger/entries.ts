// Ledger entries as data: what each kind does to granted, held and spent. Every money operation is
// one D1 batch() of conditional single statements (D1 has no interactive transactions;
// ../shared/DESIGN.md, "D1 holds the queue and the credit ledger"): a guard that decides, entries
// written only when the guard won, and one statement that adds the operation's entries to the
// balance. The batch is one SQL transaction, so either all of it happens or none.

import { drizzle } from "drizzle-orm/d1";
import { creditBalances, type LedgerKind } from "../db/ledger-schema";
import { statementOf } from "../lib/cost";
import { newId } from "../lib/crypto";

/**
 * How one entry of each kind moves the three totals. available = granted - held - spent, so the
 * identity available + held + spent = granted holds by construction; the CHECK on credit_balances
 * keeps available, held and spent from going negative.
 */
export const ENTRY_EFFECT: Readonly<Record<LedgerKind, { granted: number; held: number; spent: number }>> = {
  grant: { granted: 1, held: 0, spent: 0 }, // available goes up
  reserve: { granted: 0, held: 1, spent: 0 }, // available → held
  settle: { granted: 0, held: -1, spent: 1 }, // held → spent (the cost, within the reservation)
  release: { granted: 0, held: -1, spent: 0 }, // held → available (the unused part)
  charge: { granted: 0, held: 0, spent: 1 }, // available → spent (a reviewed cost above the reservation)
};

/** SUM(CASE kind …) over an operation's entries for one total; built from the constant table above. */
function deltaSql(total: "granted" | "held" | "spent"): string {
  const arms = Object.entries(ENTRY_EFFECT)
    .filter(([, effect]) => effect[total] !== 0)
    .map(([kind, effect]) => `WHEN '${kind}' THEN ${effect[total] > 0 ? "" : "-"}amount_cents`)
    .join(" ");
  return `(SELECT COALESCE(SUM(CASE kind ${arms} ELSE 0 END), 0) FROM ledger_entries WHERE op_id = ?1)`;
}

const APPLY_OP_SQL = `UPDATE credit_balances SET
  granted_cents = granted_cents + ${deltaSql("granted")},
  held_cents = held_cents + ${deltaSql("held")},
  spent_cents = spent_cents + ${deltaSql("spent")},
  updated_at_ms = ?3
WHERE org_id = ?2 AND EXISTS (SELECT 1 FROM ledger_entries WHERE op_id = ?1)`;

/** Adds the entries written by operation `opId` (if any) to the organization's balance. */
export function applyOp(db: D1Database, orgId: string, opId: string, nowMs: number): D1PreparedStatement {
  // Raw SQL: each total adds a sum over the operation's entries, built from ENTRY_EFFECT, which drizzle's set() would hold only as sql text.
  return db.prepare(APPLY_OP_SQL).bind(opId, orgId, nowMs);
}

/** The next per-organization entry number, computed inside the inserting statement. */
const NEXT_SEQ = `(SELECT COALESCE(MAX(seq), 0) + 1 FROM ledger_entries WHERE org_id = ?)`;

/** Makes sure the organization has a balance row (all zero) before its first grant. */
export function ensureBalance(db: D1Database, orgId: string, nowMs: number): D1PreparedStatement {
  const zero = { orgId, grantedCents: 0, heldCents: 0, spentCents: 0, updatedAtMs: nowMs };
  return statementOf(db, drizzle(db).insert(creditBalances).values(zero).onConflictDoNothing({ target: creditBalances.orgId }));
}

/** A grant entry, written unless a grant with the same external key exists. */
export function insertGrant(
  db: D1Database,
  e: { id: string; orgId: string; opId: string; amountCents: number; actor: string; note: string | null; externalKey: string | null; nowMs: number },
): D1PreparedStatement {
  // Raw SQL: a guarded INSERT … SELECT of no table, its seq computed in the statement, which drizzle would hold only as sql text.
  return db
    .prepare(
      `INSERT INTO ledger_entries (id, org_id, seq, op_id, kind, amount_cents, job_id, request_id, actor, note, external_key, created_at_ms)
       SELECT ?, ?, ${NEXT_SEQ}, ?, 'grant', ?, NULL, NULL, ?, ?, ?, ?
       WHERE ? IS NULL OR NOT EXISTS (SELECT 1 FROM ledger_entries WHERE org_id = ? AND external_key = ?)`,
    )
    .bind(e.id, e.orgId, e.orgId, e.opId, e.amountCents, e.actor, e.note, e.externalKey, e.nowMs, e.externalKey, e.orgId, e.externalKey);
}

/** What holds a reservation: a build job (build_jobs) or an autopilot run's model spend (run_reservations). */
export type Holder = "job" | "run";

/** Each holder's table, its key column, and the (job_id, request_id, run_id) an entry of it records. */
export const HOLDERS: Readonly<Record<Holder, { table: string; key: string; refs: string }>> = {
  job: { table: "build_jobs", key: "id", refs: "id, request_id, NULL" },
  run: { table: "run_reservations", key: "run_id", refs: "NULL, NULL, run_id" },
};

/** A holder's column an entry's amount is read from. */
export type AmountColumn = "reserved_cents" | "settled_cents" | "released_cents" | "charged_cents";

/**
 * A holder's entry of `kind`, written only when operation `opId` won the holder's compare-and-swap
 * (its last_op_id is `opId`) and the amount, read from the holder's column `amountColumn`, is
 * positive (or, for reserve and settle, always: a settlement is recorded even at zero cost).
 */
export function insertHeldEntry(
  db: D1Database,
  e: {
    holder: Holder;
    orgId: string;
    holderId: string;
    opId: string;
    kind: Exclude<LedgerKind, "grant">;
    amountColumn: AmountColumn;
    actor: string;
    note: string | null;
    nowMs: number;
  },
): D1PreparedStatement {
  const h = HOLDERS[e.holder];
  const always = e.kind === "settle" || e.kind === "reserve";
  // Raw SQL: an INSERT … SELECT from whichever holder's table and amount column the caller names, which a typed drizzle query cannot vary.
  return db
    .prepare(
      `INSERT INTO ledger_entries (id, org_id, seq, op_id, kind, amount_cents, job_id, request_id, run_id, actor, note, external_key, created_at_ms)
       SELECT ?, org_id, ${NEXT_SEQ}, ?, ?, ${e.amountColumn}, ${h.refs}, ?, ?, NULL, ?
       FROM ${h.table} WHERE org_id = ? AND ${h.key} = ? AND last_op_id = ? AND (${always ? "1" : "0"} OR ${e.amountColumn} > 0)`,
    )
    .bind(newId("led"), e.orgId, e.opId, e.kind, e.actor, e.note, e.nowMs, e.orgId, e.holderId, e.opId);
}

/** A build job's entry of `kind` (see insertHeldEntry). */
export function insertJobEntry(
  db: D1Database,
  e: { orgId: string; jobId: string; opId: string; kind: Exclude<LedgerKind, "grant">; amountColumn: AmountColumn; actor: string; note: string | null; nowMs: number },
): D1PreparedStatement {
  return insertHeldEntry(db, { ...e, holder: "job", holderId: e.jobId });
}
