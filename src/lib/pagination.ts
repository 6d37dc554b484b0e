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

/**
 * One page of a keyset list, newest first: the rows of `table` that meet `conditions`, after
 * `cursor`, ordered by (`at`, `id`) descending, and the next page's cursor. `id` is the row's
 * unique key column (`id` unless said otherwise, such as a run reservation's `runId`).
 */
export async function listPage<T extends SQLiteTable, K extends keyof T["$inferSelect"] & keyof T & string, I extends keyof T["$inferSelect"] & keyof T & string = "id" & keyof T["$inferSelect"] & keyof T>(
  db: D1Database,
  table: T,
  conditions: SQL[],
  cursor: string | undefined,
  limit: number,
  opts: { at: K; id?: I },
): Promise<{ kept: T["$inferSelect"][]; next: string | null }> {
  const column = (key: string) => table[key as keyof T] as unknown as SQLiteColumn;
  const atKey = opts.at;
  const idKey = opts.id ?? "id";
  const at = column(atKey);
  const id = column(idKey);
  const where = cursor === undefined ? conditions : [...conditions, afterCursor(at, id, cursor)];
  const rows = (await drizzle(db)
    .select()
    .from(table as SQLiteTable)
    .where(and(...where))
    .orderBy(desc(at), desc(id))
    .limit(limit + 1)) as Record<string, unknown>[];
  const keyed = rows.map((row) => ({ row, id: row[idKey] as string, at: row[atKey] as number }));
  const { kept, next } = pageOf(keyed, limit, (k) => k.at);
  return { kept: kept.map((k) => k.row as T["$inferSelect"]), next };
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
