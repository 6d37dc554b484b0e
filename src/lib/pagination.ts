// Keyset pagination, newest first, over (created_at_ms, id). A cursor is "<created_at_ms>.<id>" of
// the last row of the previous page, so pages stay stable while new rows arrive.

import { and, eq, lt, or, type SQL } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";

/** The condition for rows after the cursor. */
export function afterCursor(createdAtMs: SQLiteColumn, id: SQLiteColumn, cursor: string): SQL {
  const dot = cursor.indexOf(".");
  const atMs = Number(cursor.slice(0, dot));
  const lastId = cursor.slice(dot + 1);
  return or(lt(createdAtMs, atMs), and(eq(createdAtMs, atMs), lt(id, lastId)))!;
}

/** Splits `limit + 1` fetched rows into the page and the next cursor (null on the last page). */
export function pageOf<T extends { createdAtMs: number; id: string }>(rows: T[], limit: number): { kept: T[]; next: string | null } {
  const kept = rows.slice(0, limit);
  const last = kept[kept.length - 1];
  return { kept, next: rows.length > limit && last ? `${last.createdAtMs}.${last.id}` : null };
}
