// One pagination style for every list (docs/protocol.md, "Lists"): `limit` and `cursor` in the
// query, `next_cursor` in the answer, null on the last page. A cursor is opaque to clients; two
// kinds exist underneath:
// - keyset, newest first, over (a time, id): "<ms>.<id>" of the last row of the previous page, so
//   pages stay stable while new rows arrive (runs, tokens, runners, projects, build requests and jobs);
// - a sequence number, for lists numbered in order (a run's events, credit entries).

import { and, desc, eq, gt, lt, or, type SQL } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";

/** The page size: the caller's `limit`, else `fallback`, never above `ceiling` (PAGE_SIZE_MAX). */
export function pageSize(limit: number | undefined, fallback: number, ceiling: number): number {
  return Math.min(limit ?? fallback, ceiling);
}

/** The condition for rows after the keyset cursor, newest first. */
export function afterCursor(atMs: SQLiteColumn, id: SQLiteColumn, cursor: string): SQL {
  const dot = cursor.indexOf(".");
  const cursorMs = Number(cursor.slice(0, dot));
  const lastId = cursor.slice(dot + 1);
  return or(lt(atMs, cursorMs), and(eq(atMs, cursorMs), lt(id, lastId)))!;
}

/**
 * Splits `limit + 1` fetched rows into the page and the next keyset cursor (null on the last page).
 * `at` is the row's time the list is ordered by (created_at_ms unless said otherwise).
 */
export function pageOf<T extends { id: string }>(
  rows: T[],
  limit: number,
  at: (row: T) => number = (row) => (row as unknown as { createdAtMs: number }).createdAtMs,
): { kept: T[]; next: string | null } {
  const kept = rows.slice(0, limit);
  const last = kept[kept.length - 1];
  return { kept, next: rows.length > limit && last ? `${at(last)}.${last.id}` : null };
}

/** A table a keyset list pages over: rows with an id and a creation time. */
type KeysetTable = SQLiteTable & { id: SQLiteColumn };

/**
 * One page of a keyset list, newest first: the rows of `table` that meet `conditions`, after
 * `cursor`, ordered by (`at`, id) descending, and the
 * next page's cursor.
 */
export async function listPage<T extends KeysetTable, K extends keyof T["$inferSelect"] & keyof T & string>(
  db: D1Database,
  table: T,
  conditions: SQL[],
  cursor: string | undefined,
  limit: number,
  opts: { at: K },
): Promise<{ kept: T["$inferSelect"][]; next: string | null }> {
  const atKey = opts.at;
  const at = table[atKey as keyof T] as unknown as SQLiteColumn;
  const where = cursor === undefined ? conditions : [...conditions, afterCursor(at, table.id, cursor)];
  const rows = (await drizzle(db)
    .select()
    .from(table as SQLiteTable)
    .where(and(...where))
    .orderBy(desc(at), desc(table.id))
    .limit(limit + 1)) as T["$inferSelect"][];
  return pageOf(rows as (T["$inferSelect"] & { id: string })[], limit, (row) => (row as Record<string, unknown>)[atKey] as number);
}

/** The condition for rows past a sequence-number cursor: below it when newest first, above it when oldest first. */
export function pastSeq(seq: SQLiteColumn, cursor: string, order: "newest" | "oldest"): SQL {
  return order === "newest" ? lt(seq, Number(cursor)) : gt(seq, Number(cursor));
}

/** Splits `limit + 1` fetched rows, numbered by `seq`, into the page and the next cursor (null on the last page). */
export function seqPageOf<T extends { seq: number }>(rows: T[], limit: number): { kept: T[]; next: string | null } {
  const kept = rows.slice(0, limit);
  const last = kept[kept.length - 1];
  return { kept, next: rows.length > limit && last ? String(last.seq) : null };
}
