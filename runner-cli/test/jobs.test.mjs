import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { canTransition, JOB_STATES, JobDb, TRANSITIONS } from '../src/jobs.ts';

let dir;
let db;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'docket-jobs-'));
  db = new JobDb(dir);
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const claim = (runId, attempt) => ({ run_id: runId, attempt, attempt_token: 'dkt_a_secret', launch: { protocol: 'process', command: ['x'] } });

describe('job database', () => {
  it('the same attempt of a job is never scheduled twice', () => {
    expect(db.admitClaim(claim('run_1', 1)).admitted).toBe(true);
    expect(db.admitClaim(claim('run_1', 1))).toMatchObject({ admitted: false, why: 'duplicate' });
    expect(db.list()).toHaveLength(1);
  });

  it('a run with an attempt queued or running here is not scheduled again, even as a newer attempt', () => {
    db.admitClaim(claim('run_1', 1));
    expect(db.admitClaim(claim('run_1', 2))).toMatchObject({ admitted: false, why: 'busy' });
    db.transition('run_1', 1, 'running');
    expect(db.admitClaim(claim('run_1', 2))).toMatchObject({ admitted: false, why: 'busy' });
  });

  it('a newer attempt is admitted once the older one is done (a launch failure requeued the run)', () => {
    db.admitClaim(claim('run_1', 1));
    db.transition('run_1', 1, 'done', { outcome: 'launch_failed' });
    expect(db.admitClaim(claim('run_1', 2)).admitted).toBe(true);
    expect(db.list().map((j) => [j.attempt, j.state])).toEqual(expect.arrayContaining([[1, 'done'], [2, 'queued']]));
  });

  it('never stores the run-attempt token', () => {
    db.admitClaim(claim('run_1', 1));
    expect(db.get('run_1', 1).launch_json).not.toContain('dkt_a_secret');
  });

  it('refuses transitions the rules do not allow, and done is final', () => {
    db.admitClaim(claim('run_1', 1));
    db.transition('run_1', 1, 'running');
    db.transition('run_1', 1, 'done', { outcome: 'completed' });
    expect(() => db.transition('run_1', 1, 'running')).toThrow(/done → running is not allowed/);
    db.admitClaim(claim('run_2', 1));
    db.transition('run_2', 1, 'running');
    db.transition('run_2', 1, 'cost-review');
    expect(() => db.transition('run_2', 1, 'running')).toThrow(/not allowed/);
  });

  it('the transition table covers every state and only names known states', () => {
    for (const s of JOB_STATES) {
      expect(TRANSITIONS[s]).toBeDefined();
      for (const t of TRANSITIONS[s]) expect(JOB_STATES).toContain(t);
    }
    expect(canTransition('queued', 'cost-review')).toBe(false);
    expect(canTransition('interrupted', 'running')).toBe(true);
    expect(canTransition('reconcile', 'done')).toBe(true);
  });

  it('lists unfinished jobs for startup reconciliation and records every transition', () => {
    db.admitClaim(claim('run_1', 1));
    db.admitClaim(claim('run_2', 1));
    db.transition('run_2', 1, 'running');
    db.transition('run_2', 1, 'done', { outcome: 'completed' });
    db.admitClaim(claim('run_3', 1));
    db.transition('run_3', 1, 'running');
    db.transition('run_3', 1, 'interrupted', { reason: 'listener stopped' });
    expect(db.unfinished().map((j) => j.run_id)).toEqual(['run_1', 'run_3']);
    expect(db.events('run_3').map((e) => e.to_state)).toEqual(['queued', 'running', 'interrupted']);
  });

  it('survives a reopen (the database is the runner memory across crashes)', () => {
    db.admitClaim(claim('run_1', 1));
    db.transition('run_1', 1, 'running', { sandbox_id: 'process-42', sandbox_pid: 42 });
    db.close();
    db = new JobDb(dir);
    expect(db.get('run_1', 1)).toMatchObject({ state: 'running', sandbox_id: 'process-42', sandbox_pid: 42 });
  });

  it('refuses to patch columns that are not meant to change', () => {
    db.admitClaim(claim('run_1', 1));
    expect(() => db.update('run_1', 1, { state: 'done' })).toThrow(/cannot be patched/);
  });
});
