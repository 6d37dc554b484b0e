// A run that ended while no listener watched it: the next start records its real end (from the
// daemon's final.json or the server's task_gone `state`), keeps its sandbox.log for the log
// retention period, and prunes the files of jobs older than that.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { JobDb } from '../src/jobs.ts';
import { jobPaths } from '../src/launchers/common.ts';
import { heartbeatAnswer } from './helpers/answers.mjs';
import { fakeServer } from './helpers/fake-server.mjs';
import { configuredHome, spawnListen } from './helpers/listener.mjs';

const DAY_MS = 86_400_000;
const cleanups = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f();
});

const ok = (body = {}) => ({ status: 200, body });

function runnerHome(serverUrl) {
  const home = configuredHome(serverUrl, 'docket-away-', cleanups);
  const dataDir = join(home, 'data');
  mkdirSync(dataDir, { recursive: true });
  return { home, dataDir };
}

/**
 * A job the previous listener left: launched in a sandbox that is gone now, with its log and,
 * when given, the daemon's final.json.
 * @param {string} dataDir @param {string} runId @param {{ final?: any, state?: string, endedAtMs?: number }} [o]
 */
function leftJob(dataDir, runId, { final, state = 'interrupted', endedAtMs } = {}) {
  const db = new JobDb(dataDir);
  const paths = jobPaths(dataDir, runId, 1);
  mkdirSync(paths.stateDir, { recursive: true });
  mkdirSync(paths.workDir, { recursive: true });
  writeFileSync(paths.logFile, 'agent output\n');
  if (final) writeFileSync(join(paths.stateDir, 'final.json'), JSON.stringify(final));
  db.admitClaim({ run_id: runId, attempt: 1, launch: { protocol: 'process', command: ['true'], image: null, env: {} } });
  db.transition(runId, 1, 'running', { job_dir: paths.jobDir, work_dir: paths.workDir, sandbox_id: 'process-999999', sandbox_pid: 999_999, launched_at_ms: Date.now() - 60_000 });
  if (state === 'done') db.transition(runId, 1, 'done', { outcome: 'completed', ended_at_ms: endedAtMs });
  else db.transition(runId, 1, state, { reason: 'the listener stopped' });
  db.close();
  return paths;
}

function listen(home, args = []) {
  return spawnListen(home, args, cleanups);
}

/** A server on which the left runs ended: every attempt call about them is 410 task_gone with `state`. */
async function serverWhereRunsEnded(states) {
  const server = await fakeServer(({ path }) => {
    if (path === '/v1/runners/heartbeat') return ok(heartbeatAnswer());
    if (path === '/v1/runners/claim') return { status: 204 };
    const m = /^\/v1\/runs\/([^/]+)\/attempts\/1\//.exec(path);
    if (m && states[m[1]]) {
      return { status: 410, body: { error: { code: 'task_gone', message: `run ${m[1]} is ${states[m[1]]}`, state: states[m[1]], current_attempt: 1 } } };
    }
    return { status: 404, body: { error: { code: 'not_found', message: '' } } };
  });
  cleanups.push(server.close);
  return server;
}

describe('a run that ended while the listener was down', () => {
  it('is recorded with its real end, and its sandbox.log is kept', async () => {
    const server = await serverWhereRunsEnded({ run_done: 'completed', run_cancelled: 'cancelled' });
    const { home, dataDir } = runnerHome(server.url);
    // The daemon delivered its final report: the run completed while no listener watched.
    const done = leftJob(dataDir, 'run_done', { final: { delivered: true, outcome: 'completed', answer_state: 'completed', exit_codes: { agent: 0 }, cost_cents: 3 } });
    // No final report from the daemon: the run was cancelled (or reaped) on the server meanwhile.
    const cancelled = leftJob(dataDir, 'run_cancelled');
    const l = listen(home);
    const ends = await Promise.all(['run_done', 'run_cancelled'].map((id) => l.waitFor((e) => e.event === 'run_ended' && e.run_id === id)));
    expect(ends.map((e) => e.outcome)).toEqual(['completed', 'cancelled']);
    expect(l.events.some((e) => e.event === 'destroying' && e.run_id === 'run_done')).toBe(false); // its own end, nothing to destroy
    await l.kill('SIGTERM');
    const db = new JobDb(dataDir, { readonly: true });
    expect(db.get('run_done', 1)).toMatchObject({ state: 'done', outcome: 'completed', cost_cents: 3 });
    expect(db.get('run_cancelled', 1)).toMatchObject({ state: 'done', outcome: 'cancelled' });
    db.close();
    for (const paths of [done, cancelled]) {
      expect(existsSync(paths.logFile)).toBe(true);
      expect(existsSync(paths.workDir)).toBe(false);
    }
  });

  it('the files of jobs that ended longer ago than the log retention are removed at start, newer ones kept', async () => {
    const server = await serverWhereRunsEnded({});
    const { home, dataDir } = runnerHome(server.url);
    const old = leftJob(dataDir, 'run_old', { state: 'done', endedAtMs: Date.now() - 8 * DAY_MS });
    const recent = leftJob(dataDir, 'run_recent', { state: 'done', endedAtMs: Date.now() - 6 * DAY_MS });
    const l = listen(home);
    const pruned = await l.waitFor('logs_pruned');
    expect(pruned.jobs).toBe(1);
    await l.kill('SIGTERM');
    expect(existsSync(old.jobDir)).toBe(false);
    expect(existsSync(recent.logFile)).toBe(true);
    const db = new JobDb(dataDir, { readonly: true });
    expect(db.get('run_old', 1)).toMatchObject({ state: 'done', outcome: 'completed', job_dir: null }); // the row stays for status
    db.close();
  });

  it('--log-retention-ms sets the period', async () => {
    const server = await serverWhereRunsEnded({});
    const { home, dataDir } = runnerHome(server.url);
    const recent = leftJob(dataDir, 'run_hour', { state: 'done', endedAtMs: Date.now() - 3_600_000 });
    const l = listen(home, ['--log-retention-ms', '60000']);
    await l.waitFor('logs_pruned');
    await l.kill('SIGTERM');
    expect(existsSync(recent.jobDir)).toBe(false);
  });

  it('a job left in cost-review is said once more at the next start and recorded done, its reason kept; later starts are silent about it', async () => {
    const server = await serverWhereRunsEnded({});
    const { home, dataDir } = runnerHome(server.url);
    const db = new JobDb(dataDir);
    db.admitClaim({ run_id: 'run_costly', attempt: 1, launch: { protocol: 'process', command: ['true'], image: null, env: {} } });
    db.transition('run_costly', 1, 'running', { launched_at_ms: Date.now() - 60_000 });
    db.transition('run_costly', 1, 'cost-review', { outcome: 'completed', ended_at_ms: Date.now() - 1_000, reason: 'the reported cost is uncertain or above the review threshold' });
    db.close();

    const first = listen(home);
    const review = await first.waitFor('cost_review');
    expect(review).toMatchObject({ run_id: 'run_costly', outcome: 'completed', cost_cents: null });
    expect(review.message).toContain('ended completed with an unknown cost that needs review; recorded as done');
    await first.kill('SIGTERM');
    const after = new JobDb(dataDir, { readonly: true });
    expect(after.get('run_costly', 1)).toMatchObject({
      state: 'done', outcome: 'completed', reason: 'cost review: the reported cost is uncertain or above the review threshold',
    });
    after.close();

    const claimsBefore = server.requests.filter((r) => r.path === '/v1/runners/claim').length;
    const second = listen(home);
    // Claims start once the start's reconciliation is over.
    while (server.requests.filter((r) => r.path === '/v1/runners/claim').length === claimsBefore) await new Promise((r) => setTimeout(r, 50));
    await second.kill('SIGTERM');
    expect(second.events.filter((e) => e.event === 'cost_review' || e.event === 'reconciling')).toEqual([]);
    // The cost review is a record: the server was never asked about the run.
    expect(server.requests.filter((r) => r.path.includes('run_costly'))).toEqual([]);
  });
});
