// Statements that run on every claim or report, built by drizzle once, when the module loads, with
// sql.placeholder() for their values, and bound per call: the text comes from the schema, and no
// query is built per call (docs/BENCHMARKS.md, "What a claim costs").

import { fillPlaceholders, sql, type Column, type Placeholder, type SQL } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";

/** A query builder for text only: a statement is built with it, never run, so it needs no database. */
export const textOnly = drizzle({} as D1Database);

export interface FixedStatement<V> {
  bind(db: D1Database, values: V): D1PreparedStatement;
}

/** The query's text, fixed now; its placeholders are filled from `values` at each bind. */
export function fixedStatement<V extends Record<string, unknown>>(query: { toSQL(): { sql: string; params: unknown[] } }): FixedStatement<V> {
  const { sql: text, params } = query.toSQL();
  return { bind: (db, values) => db.prepare(text).bind(...fillPlaceholders(params, values)) };
}

/** A placeholder for each of `columns`, under the column's key: the values of a fixed INSERT. */
export function placeholders<K extends string>(columns: Record<K, Column>): Record<K, Placeholder> {
  return Object.fromEntries(Object.keys(columns).map((key) => [key, sql.placeholder(key)])) as Record<K, Placeholder>;
}

/** `column = excluded.column` for each of `columns`: an upsert that takes the inserted row's values. */
export function excluded<K extends string>(columns: Record<K, Column>): Record<K, SQL> {
  return Object.fromEntries(Object.entries<Column>(columns).map(([key, column]) => [key, sql`excluded.${sql.identifier(column.name)}`])) as Record<K, SQL>;
}
