// The runner's durable job database (shared/spec/build-lifecycle.md, "Runner states are separate
// from page labels"). One row per (run, attempt): an attempt is inserted once and so never
// scheduled twice, and a run with an attempt queued or running here is not scheduled again.
import Database from 'better-sqlite3';
import { chmodSync, existsSync } from 'node:fs';
import { join } from 'node:path';

/**
 * queued       claimed from the server, not launched yet
 * running      the sandbox is up and this listener holds the lease
 * interrupted  the listener stopped (signal, 426, crash) while the job was active; the next start reconciles it
 * reconcile    the server's answer was not conclusive; an operator (or the next start) looks at it
 * cost-review  the reported cost was uncertain or above the review threshold
 * done         finished; `outcome` says how
 */
export const JOB_STATES = /** @type {const} */ (['queued', 'running', 'interrupted', 'reconcile', 'cost-review', 'done']);

/** Allowed transitions, as data. Every write checks them and compares-and-swaps on the state. */
export const TRANSITIONS = /** @type {Record<string, readonly string[]>} */ ({
  queued: ['running', 'interrupted', 'reconcile', 'done'],
  running: ['interrupted', 'reconcile', 'cost-review', 'done'],
  interrupted: ['running', 'reconcile', 'cost-review', 'done'],
  reconcile: ['running', 'interrupted', 'cost-review', 'done'],
  'cost-review': ['done'],
  done: [],
});

/** @param {string} from @param {string} to */
export function canTransition(from, to) {
  return (TRANSITIONS[from] ?? []).includes(to);
}

const PATCHABLE = new Set([
  'outcome', 'reason', 'protocol', 'sandbox_id', 'sandbox_pid', 'sandbox_start_ticks', 'job_dir', 'work_dir',
  'phase', 'lifetime_ms', 'launched_at_ms', 'ended_at_ms', 'lease_expires_at_ms', 'cost_cents',
]);

const SCHEMA = `
CREATE TABLE IF NOT EXISTS jobs (
  run_id TEXT NOT NULL,
  attempt INTEGER NOT NULL CHECK (attempt >= 1),
  state TEXT NOT NULL CHECK (state IN ('queued','running','interrupted','reconcile','cost-review','done')),
  outcome TEXT,
  reason TEXT,
  protocol TEXT NOT NULL,
  launch_json TEXT NOT NULL,
  sandbox_id TEXT,
  sandbox_pid INTEGER,
  sandbox_start_ticks TEXT,
  job_dir TEXT,
  work_dir TEXT,
  phase TEXT,
  lifetime_ms INTEGER,
  cost_cents INTEGER,
  lease_expires_at_ms INTEGER,
  claimed_at_ms INTEGER NOT NULL,
  launched_at_ms INTEGER,
  ended_at_ms INTEGER,
  updated_at_ms INTEGER NOT NULL,
  PRIMARY KEY (run_id, attempt)
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs (state);
CREATE TABLE IF NOT EXISTS job_events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  at_ms INTEGER NOT NULL,
  from_state TEXT,
  to_state TEXT NOT NULL,
  note TEXT
);
`;

export class JobDb {
  /**
   * @param {string} dataDir
   * @param {{ now?: () => number, readonly?: boolean }} [opts]
   */
  constructor(dataDir, { now = Date.now, readonly = false } = {}) {
    const path = join(dataDir, 'jobs.sqlite');
    if (readonly && !existsSync(path)) {
      this.db = null;
      this.now = now;
      return;
    }
    this.db = new Database(path, { readonly });
    this.now = now;
    if (!readonly) {
      chmodSync(path, 0o600);
      this.db.pragma('journal_mode = WAL');
      this.db.pragma('synchronous = FULL'); // a job row must survive a kill -9 or a power cut
      this.db.exec(SCHEMA);
    }
    this.db.pragma('busy_timeout = 5000');
  }

  close() {
    this.db?.close();
  }

  /**
   * Record a claim, unless it would schedule work twice.
   * @param {{ run_id: string, attempt: number, launch?: { protocol?: string } }} claim the claim answer
   * @returns {{ admitted: true, job: any } | { admitted: false, why: 'duplicate' | 'busy', job: any }}
   */
  admitClaim(claim) {
    const db = this.#db();
    const { attempt_token: _token, ...stored } = /** @type {any} */ (claim); // credentials stay out of the database
    return db.transaction(() => {
      const same = this.get(claim.run_id, claim.attempt);
      if (same) return { admitted: false, why: 'duplicate', job: same };
      const active = db
        .prepare(`SELECT * FROM jobs WHERE run_id = ? AND state IN ('queued','running') ORDER BY attempt DESC LIMIT 1`)
        .get(claim.run_id);
      if (active) return { admitted: false, why: 'busy', job: active };
      const now = this.now();
      db.prepare(
        `INSERT INTO jobs (run_id, attempt, state, protocol, launch_json, claimed_at_ms, updated_at_ms)
         VALUES (?, ?, 'queued', ?, ?, ?, ?)`,
      ).run(claim.run_id, claim.attempt, claim.launch?.protocol ?? 'process', JSON.stringify(stored), now, now);
      this.#event(claim.run_id, claim.attempt, null, 'queued', 'claimed');
      return { admitted: true, job: this.get(claim.run_id, claim.attempt) };
    }).immediate();
  }

  /**
   * Move a job to another state; a compare-and-swap on its current state.
   * @param {string} runId @param {number} attempt @param {string} to
   * @param {Record<string, any>} [patch] columns to set with it
   * @param {string} [note]
   */
  transition(runId, attempt, to, patch = {}, note) {
    const db = this.#db();
    return db.transaction(() => {
      const job = this.get(runId, attempt);
      if (!job) throw new Error(`no job ${runId}#${attempt}`);
      if (job.state === to) return this.#patch(job, patch);
      if (!canTransition(job.state, to)) {
        throw new Error(`job ${runId}#${attempt}: ${job.state} → ${to} is not allowed`);
      }
      const sets = this.#sets(patch);
      const info = db
        .prepare(`UPDATE jobs SET state = ?, updated_at_ms = ?${sets.sql} WHERE run_id = ? AND attempt = ? AND state = ?`)
        .run(to, this.now(), ...sets.values, runId, attempt, job.state);
      if (info.changes !== 1) throw new Error(`job ${runId}#${attempt} changed under us`);
      this.#event(runId, attempt, job.state, to, note ?? patch.reason ?? null);
      return this.get(runId, attempt);
    }).immediate();
  }

  /** Set columns without changing the state. @param {string} runId @param {number} attempt @param {Record<string, any>} patch */
  update(runId, attempt, patch) {
    const job = this.get(runId, attempt);
    if (!job) throw new Error(`no job ${runId}#${attempt}`);
    return this.#patch(job, patch);
  }

  /** @param {string} runId @param {number} attempt */
  get(runId, attempt) {
    if (!this.db) return undefined;
    return this.db.prepare('SELECT * FROM jobs WHERE run_id = ? AND attempt = ?').get(runId, attempt);
  }

  /** Jobs that are not done, oldest first. */
  unfinished() {
    if (!this.db) return [];
    return this.db.prepare(`SELECT * FROM jobs WHERE state != 'done' ORDER BY claimed_at_ms, run_id, attempt`).all();
  }

  /** @param {{ limit?: number, state?: string }} [opts] newest first */
  list({ limit = 50, state } = {}) {
    if (!this.db) return [];
    if (state) {
      return this.db.prepare('SELECT * FROM jobs WHERE state = ? ORDER BY claimed_at_ms DESC LIMIT ?').all(state, limit);
    }
    return this.db.prepare('SELECT * FROM jobs ORDER BY claimed_at_ms DESC LIMIT ?').all(limit);
  }

  /**
   * Done jobs that ended before `beforeMs` and still have files, oldest first.
   * @param {number} beforeMs @param {number} limit
   */
  expiredJobDirs(beforeMs, limit) {
    if (!this.db) return [];
    return this.db
      .prepare(`SELECT * FROM jobs WHERE state = 'done' AND ended_at_ms < ? AND job_dir IS NOT NULL ORDER BY ended_at_ms LIMIT ?`)
      .all(beforeMs, limit);
  }

  /** @param {string} runId */
  events(runId) {
    if (!this.db) return [];
    return this.db.prepare('SELECT * FROM job_events WHERE run_id = ? ORDER BY id').all(runId);
  }

  #db() {
    if (!this.db) throw new Error('the job database is not open');
    return this.db;
  }

  /** @param {any} job @param {Record<string, any>} patch */
  #patch(job, patch) {
    const sets = this.#sets(patch);
    if (sets.values.length === 0) return job;
    this.#db()
      .prepare(`UPDATE jobs SET updated_at_ms = ?${sets.sql} WHERE run_id = ? AND attempt = ?`)
      .run(this.now(), ...sets.values, job.run_id, job.attempt);
    return this.get(job.run_id, job.attempt);
  }

  /** @param {Record<string, any>} patch */
  #sets(patch) {
    const keys = Object.keys(patch).filter((k) => patch[k] !== undefined);
    for (const k of keys) if (!PATCHABLE.has(k)) throw new Error(`job column ${k} cannot be patched`);
    return { sql: keys.map((k) => `, ${k} = ?`).join(''), values: keys.map((k) => patch[k]) };
  }

  /** @param {string} runId @param {number} attempt @param {string | null} from @param {string} to @param {string | null} note */
  #event(runId, attempt, from, to, note) {
    this.#db()
      .prepare('INSERT INTO job_events (run_id, attempt, at_ms, from_state, to_state, note) VALUES (?, ?, ?, ?, ?, ?)')
      .run(runId, attempt, this.now(), from, to, note);
  }
}
