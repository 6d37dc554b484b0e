// A Durable Object's SQLite through drizzle (drizzle-orm/durable-sqlite): each object class has one
// schema file (run-schema.ts, scheduler-schema.ts, ticket-schema.ts) and the migrations drizzle-kit
// generates from it (durable-objects/drizzle/<store>/, `npm run db:generate`), applied in the
// constructor under blockConcurrencyWhile, before any call is served (migrateOnStart).
//
// Objects already live were made by the hand-written steps of durable-objects/legacy/ (version in a
// one-row `_schema` table). The first generated migration of each store is the schema of the last
// of those steps, so such an object is adopted: the frozen steps bring it to that version, and the
// baseline is recorded as applied without running it. It keeps its rows; later migrations reach it
// as they reach a new object.

import { getTableName, is } from "drizzle-orm";
import { drizzle, type DrizzleSqliteDODatabase } from "drizzle-orm/durable-sqlite";
import { migrate } from "drizzle-orm/durable-sqlite/migrator";
import { SQLiteTable } from "drizzle-orm/sqlite-core";
import { migrate as migrateLegacy, type MigrationStep } from "./legacy/migrator";

/** A store's drizzle database. */
export type StoreDb = DrizzleSqliteDODatabase;

/** What drizzle-kit's migrations.js of a store exports (durable-sqlite driver). */
export interface StoreMigrations {
  journal: { entries: { idx: number; when: number; tag: string; breakpoints: boolean }[] };
  migrations: Record<string, string>;
}

export interface StoreDefinition {
  /** The store's schema module: its tables name the object's tables. */
  schema: Record<string, unknown>;
  migrations: StoreMigrations;
  /** The frozen hand-written steps that made the objects already live. */
  legacySteps: readonly MigrationStep[];
}

/** drizzle's record of applied migrations (drizzle-orm/durable-sqlite/migrator). */
export const DRIZZLE_MIGRATIONS_TABLE = "__drizzle_migrations";

/** A store's drizzle database over the object's SQLite; migrateOnStart() readies its schema. */
export function storeDb(ctx: DurableObjectState): StoreDb {
  return drizzle(ctx.storage);
}

/**
 * Migrates an object's store in its constructor, then runs `ready` (work the object does at start
 * over its storage); the migration's promise is awaited under blockConcurrencyWhile, drizzle's
 * documented way, so no call is served before it settles (a failure resets the object). drizzle-orm/
 * durable-sqlite's migrator does its work in one transactionSync before that promise returns, so the
 * schema is in place, and the start's work done, when the constructor returns, as with the
 * hand-written steps: a blockConcurrencyWhile called inside a request (a test's new instance) runs
 * only after that request.
 */
export function migrateOnStart(ctx: DurableObjectState, db: StoreDb, store: StoreDefinition, ready?: () => void): void {
  const migrated = migrateStore(ctx.storage, db, store);
  ready?.();
  void ctx.blockConcurrencyWhile(() => migrated);
}

/** Adopts an object the hand-written steps made, then applies the generated migrations it has not applied. */
export function migrateStore(storage: DurableObjectStorage, db: StoreDb, store: StoreDefinition): Promise<void> {
  adoptLegacyObject(storage, store);
  return migrate(db, store.migrations);
}

/** The names of the tables the store's schema declares. */
export function storeTables(store: StoreDefinition): string[] {
  return Object.values(store.schema).flatMap((t) => (is(t, SQLiteTable) ? [getTableName(t)] : []));
}

/**
 * An object that holds the store's tables but no record of drizzle's migrations was made by the
 * hand-written steps: they bring it to their last version, and the baseline migration, that same
 * schema, is recorded as applied. A new object (none of the tables) is left to the migrations.
 */
function adoptLegacyObject(storage: DurableObjectStorage, store: StoreDefinition): void {
  // What the object holds, from SQLite's own catalogue (no schema of ours names it).
  const present = new Set(storage.sql.exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'").toArray().map((r) => r.name));
  if (present.has(DRIZZLE_MIGRATIONS_TABLE)) return;
  if (!present.has("_schema") && !storeTables(store).some((name) => present.has(name))) return;
  migrateLegacy(storage, store.legacySteps);
  const baseline = store.migrations.journal.entries[0];
  storage.transactionSync(() => {
    // drizzle's own bookkeeping, in the words of its migrator (no schema of ours names it).
    storage.sql.exec(`CREATE TABLE IF NOT EXISTS "${DRIZZLE_MIGRATIONS_TABLE}" (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at numeric)`);
    storage.sql.exec(`INSERT INTO "${DRIZZLE_MIGRATIONS_TABLE}" ("hash", "created_at") VALUES ('', ?)`, baseline.when);
  });
}
