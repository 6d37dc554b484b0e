// Versioned schema for a Durable Object's SQLite: an ordered list of steps per object class, run in
// the constructor before any call is served. The object records the last step it applied in a
// one-row `_schema` table (a table rather than PRAGMA user_version, which Durable Object SQLite
// does not promise to allow), so a step added to the end of a list reaches every live object the
// next time it starts, and a column can be added to objects that already hold data.

/** One schema change. Steps run in order, each at most once per object; never edit a shipped step. */
export type MigrationStep = (sql: SqlStorage) => void;

/**
 * Brings this object's schema up to the end of `steps` in one transaction per step, each recorded
 * with the version it reached. Answers the version the object is now at.
 */
export function migrate(storage: DurableObjectStorage, steps: readonly MigrationStep[]): number {
  const sql = storage.sql;
  sql.exec("CREATE TABLE IF NOT EXISTS _schema (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)");
  let version = sql.exec<{ version: number }>("SELECT version FROM _schema WHERE id = 1").toArray()[0]?.version ?? 0;
  if (version > steps.length) {
    // Code older than the object's data (a rollback): its steps are a prefix of what ran; carry on.
    return version;
  }
  while (version < steps.length) {
    const step = steps[version];
    const next = version + 1;
    storage.transactionSync(() => {
      step(sql);
      sql.exec("INSERT INTO _schema (id, version) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET version = excluded.version", next);
    });
    version = next;
  }
  return version;
}

/** The version an object's schema is at (0 before its first migration). */
export function schemaVersion(sql: SqlStorage): number {
  const exists = sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = '_schema'").one().n;
  if (exists === 0) return 0;
  return sql.exec<{ version: number }>("SELECT version FROM _schema WHERE id = 1").toArray()[0]?.version ?? 0;
}
