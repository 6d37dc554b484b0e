// What one request costs the platform: the D1 rows its statements read and wrote, in the Worker
// and in the Durable Objects it called (they return their counts in their RPC answers), and the
// Durable Object requests it made. Claims report it in the Docket-Cost header, so the claim of
// ../shared/DESIGN.md, "Claims are serialized per organization" (a claim's cost does not grow with
// work the runner cannot serve) can be checked in production too (docs/BENCHMARKS.md).

export interface Cost {
  d1RowsRead: number;
  d1RowsWritten: number;
  doRequests: number;
}

export const COST_HEADER = "Docket-Cost";

export function noCost(): Cost {
  return { d1RowsRead: 0, d1RowsWritten: 0, doRequests: 0 };
}

/** Adds `more` into `into`. */
export function addCost(into: Cost, more: Cost): void {
  into.d1RowsRead += more.d1RowsRead;
  into.d1RowsWritten += more.d1RowsWritten;
  into.doRequests += more.doRequests;
}

/** Adds the rows one D1 answer reports in its `meta`. */
export function addD1(into: Cost, meta: Pick<D1Meta, "rows_read" | "rows_written"> | undefined): void {
  into.d1RowsRead += meta?.rows_read ?? 0;
  into.d1RowsWritten += meta?.rows_written ?? 0;
}

/**
 * Runs one bound statement and counts its rows. Drizzle's D1 driver reads rows with raw(), which
 * drops `meta`, so the statements whose cost is reported go through all() or batch().
 */
export async function countedAll<T>(cost: Cost, statement: D1PreparedStatement): Promise<T[]> {
  const result = await statement.all<T>();
  addD1(cost, result.meta);
  return result.results;
}

/**
 * A query built with drizzle as a bound D1 statement, so it can join one D1 batch with statements
 * drizzle cannot say (the ledger's, src/ledger/entries.ts). Rows come back under the columns' names.
 */
export function statementOf(db: D1Database, query: { toSQL(): { sql: string; params: unknown[] } }): D1PreparedStatement {
  const { sql, params } = query.toSQL();
  return db.prepare(sql).bind(...params);
}

/** Runs bound statements in one D1 batch (one round trip) and counts their rows. */
export async function countedBatch<T>(cost: Cost, db: D1Database, statements: D1PreparedStatement[]): Promise<T[][]> {
  if (statements.length === 0) return [];
  const results = await db.batch<T>(statements);
  for (const result of results) addD1(cost, result.meta);
  return results.map((r) => r.results);
}

/** The header value: `d1_rows_read=3, d1_rows_written=1, do_requests=2`. */
export function formatCost(cost: Cost): string {
  return `d1_rows_read=${cost.d1RowsRead}, d1_rows_written=${cost.d1RowsWritten}, do_requests=${cost.doRequests}`;
}
