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
export const JOB_STATES = ['queued', 'running', 'interrupted', 'reconcile', 'cost-review', 'done'] as const;
export type JobState = (typeof JOB_STATES)[number];

/** Allowed transitions, as data. Every write checks them and compares-and-swaps on the state. */
export const TRANSITIONS: Record<string, readonly string[]> = {
  queued: ['running', 'interrupted', 'reconcile', 'done'],
  running: ['interrupted', 'reconcile', 'cost-review', 'done'],
  interrupted: ['running', 'reconcile', 'cost-review', 'done'],
  reconcile: ['running', 'interrupted', 'cost-review', 'done'],
  'cost-review': ['done'],
  done: [],
};

export function canTransition(from: string, to: string) {
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

/** One row of `jobs`, as SQLite gives it back. */
export interface JobRow {
  run_id: string;
  attempt: number;
  state: JobState;
  outcome: string | null;
  reason: string | null;
  protocol: string;
  launch_json: string;
  sandbox_id: string | null;
  sandbox_pid: number | null;
  sandbox_start_ticks: string | null;
  job_dir: string | null;
  work_dir: string | null;
  phase: string | null;
  lifetime_ms: number | null;
  cost_cents: number | null;
  lease_expires_at_ms: number | null;
  claimed_at_ms: number;
  launched_at_ms: number | null;
  ended_at_ms: number | null;
  updated_at_ms: number;
}

/** One row of `job_events`. */
export interface JobEventRow {
  id: number;
  run_id: string;
  attempt: number;
  at_ms: number;
  from_state: string | null;
  to_state: string;
  note: string | null;
}

export class JobDb {
  now: () => number;
  db: Database.Database | null;
  constructor(dataDir: string, { now = Date.now, readonly = false }: { now?: () => number; readonly?: boolean } = {}) {
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
   * @param claim the claim answer
   */
  admitClaim(claim: { run_id: string; attempt: number; launch?: { protocol?: string } }): { admitted: true; job: JobRow } | { admitted: false; why: 'duplicate' | 'busy'; job: JobRow } {
    const db = this.#db();
    const { attempt_token: _token, ...stored } = claim as typeof claim & { attempt_token?: string }; // credentials stay out of the database
    return db.transaction((): { admitted: true; job: JobRow } | { admitted: false; why: 'duplicate' | 'busy'; job: JobRow } => {
      const same = this.get(claim.run_id, claim.attempt);
      if (same) return { admitted: false, why: 'duplicate', job: same };
      const active = db
        .prepare(`SELECT * FROM jobs WHERE run_id = ? AND state IN ('queued','running') ORDER BY attempt DESC LIMIT 1`)
        .get(claim.run_id) as JobRow | undefined;
      if (active) return { admitted: false, why: 'busy', job: active };
      const now = this.now();
      db.prepare(
        `INSERT INTO jobs (run_id, attempt, state, protocol, launch_json, claimed_at_ms, updated_at_ms)
         VALUES (?, ?, 'queued', ?, ?, ?, ?)`,
      ).run(claim.run_id, claim.attempt, claim.launch?.protocol ?? 'process', JSON.stringify(stored), now, now);
      this.#event(claim.run_id, claim.attempt, null, 'queued', 'claimed');
      return { admitted: true, job: this.get(claim.run_id, claim.attempt) as JobRow };
    }).immediate();
  }

  /**
   * Move a job to another state; a compare-and-swap on its current state.
   * @param patch columns to set with it
   */
  transition(runId: string, attempt: number, to: string, patch: Record<string, any> = {}, note?: string): JobRow {
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
      return this.get(runId, attempt) as JobRow;
    }).immediate();
  }

  /** Set columns without changing the state. */
  update(runId: string, attempt: number, patch: Record<string, any>): JobRow {
    const job = this.get(runId, attempt);
    if (!job) throw new Error(`no job ${runId}#${attempt}`);
    return this.#patch(job, patch);
  }

  get(runId: string, attempt: number): JobRow | undefined {
    if (!this.db) return undefined;
    return this.db.prepare('SELECT * FROM jobs WHERE run_id = ? AND attempt = ?').get(runId, attempt) as JobRow | undefined;
  }

  /** Jobs that are not done, oldest first. */
  unfinished(): JobRow[] {
    if (!this.db) return [];
    return this.db.prepare(`SELECT * FROM jobs WHERE state != 'done' ORDER BY claimed_at_ms, run_id, attempt`).all() as JobRow[];
  }

  /** @param opts newest first */
  list({ limit = 50, state }: { limit?: number; state?: string } = {}): JobRow[] {
    if (!this.db) return [];
    if (state) {
      return this.db.prepare('SELECT * FROM jobs WHERE state = ? ORDER BY claimed_at_ms DESC LIMIT ?').all(state, limit) as JobRow[];
    }
    return this.db.prepare('SELECT * FROM jobs ORDER BY claimed_at_ms DESC LIMIT ?').all(limit) as JobRow[];
  }

  /**
   * Done jobs that ended before `beforeMs` and still have files, oldest first.
   */
  expiredJobDirs(beforeMs: number, limit: number): JobRow[] {
    if (!this.db) return [];
    return this.db
      .prepare(`SELECT * FROM jobs WHERE state = 'done' AND ended_at_ms < ? AND job_dir IS NOT NULL ORDER BY ended_at_ms LIMIT ?`)
      .all(beforeMs, limit) as JobRow[];
  }

  events(runId: string): JobEventRow[] {
    if (!this.db) return [];
    return this.db.prepare('SELECT * FROM job_events WHERE run_id = ? ORDER BY id').all(runId) as JobEventRow[];
  }

  #db() {
    if (!this.db) throw new Error('the job database is not open');
    return this.db;
  }

  #patch(job: JobRow, patch: Record<string, any>): JobRow {
    const sets = this.#sets(patch);
    if (sets.values.length === 0) return job;
    this.#db()
      .prepare(`UPDATE jobs SET updated_at_ms = ?${sets.sql} WHERE run_id = ? AND attempt = ?`)
      .run(this.now(), ...sets.values, job.run_id, job.attempt);
    return this.get(job.run_id, job.attempt) as JobRow;
  }

  #sets(patch: Record<string, any>) {
    const keys = Object.keys(patch).filter((k) => patch[k] !== undefined);
    for (const k of keys) if (!PATCHABLE.has(k)) throw new Error(`job column ${k} cannot be patched`);
    return { sql: keys.map((k) => `, ${k} = ?`).join(''), values: keys.map((k) => patch[k]) };
  }

  #event(runId: string, attempt: number, from: string | null, to: string, note: string | null) {
    this.#db()
      .prepare('INSERT INTO job_events (run_id, attempt, at_ms, from_state, to_state, note) VALUES (?, ?, ?, ?, ?, ?)')
      .run(runId, attempt, this.now(), from, to, note);
  }
}
