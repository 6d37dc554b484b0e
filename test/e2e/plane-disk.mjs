// What the local plane holds on disk, read while it is down (or read-only while it runs): every
// run object's stored record, the alarm workerd keeps for it, its D1 queue row, and the sweep's last
// cron tick. workerd keeps each Durable Object's SQLite under
// <persist>/v3/do/<script>-<class>/<actor id>.sqlite and the alarms of a class in that directory's
// metadata.sqlite (`_cf_ALARM`, scheduled_time in ns); local D1 is under
// <persist>/v3/d1/miniflare-D1DatabaseObject/.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';

const HELD = ['claimed', 'implementing', 'pausing'];
export const TERMINAL = ['completed', 'failed', 'cancelled'];

/** @param {string} path @param {(db: import('better-sqlite3').Database) => any} fn */
function withDb(path, fn) {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 2000');
    return fn(db);
  } finally {
    db.close();
  }
}

/**
 * Every run object on disk: its record, its alarm (ms, or null) and its D1 queue row's version.
 * @param {string} persist
 * @returns {Array<{ id: string, state: string, attempt: number, version: number, doc: any, projectedVersion: number, alarmAtMs: number | null, d1Version: number | null }>}
 */
export function readRunObjects(persist) {
  const dir = join(persist, 'v3', 'do', 'docket-RunObject');
  if (!existsSync(dir)) return [];
  /** @type {Map<string, number>} */
  const alarms = new Map();
  if (existsSync(join(dir, 'metadata.sqlite'))) {
    withDb(join(dir, 'metadata.sqlite'), (db) => {
      const hasTable = db.prepare("SELECT 1 FROM sqlite_master WHERE name = '_cf_ALARM'").get();
      if (!hasTable) return;
      for (const r of db.prepare('SELECT actor_id, scheduled_time FROM _cf_ALARM').all()) {
        if (r.scheduled_time !== null) alarms.set(r.actor_id, Math.floor(Number(r.scheduled_time) / 1e6));
      }
    });
  }
  const d1Versions = readD1Versions(persist);
  const out = [];
  for (const file of readdirSync(dir)) {
    if (!file.endsWith('.sqlite') || file === 'metadata.sqlite') continue;
    const actor = file.slice(0, -'.sqlite'.length);
    const row = withDb(join(dir, file), (db) => {
      const hasRun = db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'run'").get();
      return hasRun ? db.prepare('SELECT id, state, attempt, version, doc, projected_version FROM run LIMIT 1').get() : null;
    });
    if (!row) continue;
    out.push({
      id: row.id,
      state: row.state,
      attempt: row.attempt,
      version: row.version,
      doc: JSON.parse(row.doc),
      projectedVersion: row.projected_version,
      alarmAtMs: alarms.get(actor) ?? null,
      d1Version: d1Versions.get(row.id) ?? null,
    });
  }
  return out;
}

/**
 * Runs `fn` on each local D1 database under `persist` that has `table`.
 * @param {string} persist @param {string} table @param {(db: import('better-sqlite3').Database) => void} fn
 */
function eachD1WithTable(persist, table, fn) {
  const dir = join(persist, 'v3', 'd1', 'miniflare-D1DatabaseObject');
  if (!existsSync(dir)) return;
  for (const file of readdirSync(dir)) {
    if (!file.endsWith('.sqlite') || file === 'metadata.sqlite') continue;
    withDb(join(dir, file), (db) => {
      if (db.prepare('SELECT 1 FROM sqlite_master WHERE name = ?').get(table)) fn(db);
    });
  }
}

/** The D1 queue rows' versions by run id. @param {string} persist */
function readD1Versions(persist) {
  /** @type {Map<string, number>} */
  const versions = new Map();
  eachD1WithTable(persist, 'runs', (db) => {
    for (const r of db.prepare('SELECT id, version FROM runs').all()) versions.set(r.id, r.version);
  });
  return versions;
}

/** The cron's last tick as the sweep row in D1 records it (ms), or null before any. @param {string} persist */
export function readLastTick(persist) {
  /** @type {number | null} */
  let lastTickAtMs = null;
  eachD1WithTable(persist, 'sweep', (db) => {
    lastTickAtMs = db.prepare('SELECT last_tick_at_ms FROM sweep WHERE id = 1').get()?.last_tick_at_ms ?? lastTickAtMs;
  });
  return lastTickAtMs;
}

/**
 * Runs that nothing will move on again: a run a machine holds (claimed, implementing, pausing)
 * with no alarm is never reaped if its runner is gone; a queued run whose D1 queue row is missing
 * or behind, with no alarm, is never claimed (claims find work through D1 only); a queued run
 * waiting out a backoff with no alarm is never offered again.
 * @param {ReturnType<typeof readRunObjects>} objects
 */
export function strandedRuns(objects) {
  const out = [];
  for (const o of objects) {
    if (TERMINAL.includes(o.state) || o.alarmAtMs !== null) continue;
    if (HELD.includes(o.state)) out.push({ ...summary(o), why: `${o.state} with no alarm: nothing reaps it if its runner never acts` });
    else if (o.state === 'queued' && (o.d1Version ?? 0) < o.version) {
      out.push({ ...summary(o), why: `queued, its D1 queue row ${o.d1Version === null ? 'missing' : `at version ${o.d1Version}`}, and no alarm: no claim can find it` });
    }
  }
  return out;
}

/** @param {ReturnType<typeof readRunObjects>[number]} o */
export function summary(o) {
  return { run: o.id, state: o.state, attempt: o.attempt, version: o.version, d1_version: o.d1Version, projected_version: o.projectedVersion, alarm_at_ms: o.alarmAtMs };
}
