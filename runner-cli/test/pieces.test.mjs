import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiError, classify } from '../src/api.ts';
import { effectiveLifetimeMs } from '../src/job-attempt.ts';
import { sandboxEnv } from '../src/launchers/common.ts';
import { acquireLock, LockedError, lockHolder } from '../src/lock.ts';
import { formatDuration, Output } from '../src/output.ts';

const dirs = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('what a server answer means to the runner', () => {
  it('only task_gone, other_organization and other_machine destroy a workload', () => {
    expect(classify(new ApiError(410, 'task_gone', ''))).toBe('definitive');
    expect(classify(new ApiError(403, 'other_organization', ''))).toBe('definitive');
    expect(classify(new ApiError(409, 'other_machine', ''))).toBe('definitive');
    expect(classify(new ApiError(409, 'stale_attempt', ''))).toBe('attempt_over');
    expect(classify(new ApiError(409, 'lease_expired', ''))).toBe('attempt_over');
    expect(classify(new ApiError(426, 'listener_upgrade_required', ''))).toBe('upgrade');
    for (const e of [new ApiError(401, 'unauthorized', ''), new ApiError(500, 'internal', ''), new ApiError(502, 'http_502', ''),
      new ApiError(0, 'timeout', ''), new ApiError(0, 'network', ''), new Error('boom')]) {
      expect(classify(e)).toBe('transient');
    }
  });
});

describe('the sandbox environment', () => {
  it('never hands a DOCKET_* variable of the runner (such as its machine token) to the sandbox', () => {
    const env = sandboxEnv(
      { PATH: '/bin', HOME: '/h', DOCKET_MACHINE_TOKEN: 'dkt_s_x', SECRET: 's', OPENAI_API_KEY: 'k' },
      ['OPENAI_API_KEY', 'DOCKET_MACHINE_TOKEN'],
      { K: 'V', DOCKET_URL: 'http://evil' },
      { DOCKET_URL: 'http://docket', DOCKET_ATTEMPT_TOKEN: 'dkt_a_x' },
    );
    expect(env).toEqual({ PATH: '/bin', HOME: '/h', OPENAI_API_KEY: 'k', K: 'V', DOCKET_URL: 'http://docket', DOCKET_ATTEMPT_TOKEN: 'dkt_a_x' });
  });

  it("hands the run's own DOCKET_* variables (a build's job id and cap) to the agent, but none the runner owns", () => {
    const env = sandboxEnv(
      { PATH: '/bin' },
      [],
      {
        DOCKET_JOB_ID: 'job_1', DOCKET_USD_CAP_CENTS: '2500',
        DOCKET_DAEMON_STOP_GRACE_MS: '1', DOCKET_RESUME_FILE: '/x', DOCKET_SOURCE_REVISION: 'f00', DOCKET_RUN_ID: 'run_other',
      },
      { DOCKET_RUN_ID: 'run_1' },
    );
    expect(env).toEqual({ PATH: '/bin', DOCKET_JOB_ID: 'job_1', DOCKET_USD_CAP_CENTS: '2500', DOCKET_RUN_ID: 'run_1' });
  });
});

describe('sandbox lifetime', () => {
  it("is the server's, capped by a lower local setting; 600 s when neither says", () => {
    expect(effectiveLifetimeMs(undefined, 600_000)).toBe(600_000);
    expect(effectiveLifetimeMs(5_000, 600_000)).toBe(5_000);
    expect(effectiveLifetimeMs(900_000, 600_000)).toBe(600_000);
    expect(effectiveLifetimeMs(undefined, undefined)).toBe(600_000);
  });
});

describe('the data directory lock', () => {
  it('a second holder is refused while the first lives, and the lock is free after release', () => {
    const dir = mkdtempSync(join(tmpdir(), 'docket-lock-'));
    dirs.push(dir);
    const release = acquireLock(dir);
    expect(lockHolder(dir)?.pid).toBe(process.pid);
    expect(() => acquireLock(dir)).toThrow(LockedError);
    release();
    expect(lockHolder(dir)).toBeNull();
    acquireLock(dir)();
  });

  it('a lock left by a dead process is taken over', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'docket-lock-'));
    dirs.push(dir);
    const child = spawn(process.execPath, ['-e', '0']);
    const pid = child.pid;
    await new Promise((r) => child.on('exit', r));
    writeFileSync(join(dir, 'listen.lock'), JSON.stringify({ pid }));
    expect(lockHolder(dir)).toBeNull();
    const release = acquireLock(dir);
    expect(lockHolder(dir)?.pid).toBe(process.pid);
    release();
  });

  it('a lock held by a zombie (a listener killed outright, not yet reaped by its parent) is taken over', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'docket-lock-'));
    dirs.push(dir);
    // The background job exits once its shell has become `sleep 5`, which never reaps it: a zombie.
    const parent = spawn('sh', ['-c', 'sleep 0.2 & echo $!; exec sleep 5']);
    const pid = Number(await new Promise((r) => parent.stdout.once('data', (d) => r(String(d).trim()))));
    for (let i = 0; i < 100 && !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z '); i++) await new Promise((r) => setTimeout(r, 20));
    expect(readFileSync(`/proc/${pid}/stat`, 'utf8')).toContain(') Z ');
    writeFileSync(join(dir, 'listen.lock'), JSON.stringify({ pid }));
    expect(lockHolder(dir)).toBeNull();
    acquireLock(dir)();
    parent.kill('SIGKILL');
  });
});

describe('output', () => {
  const capture = (json) => {
    const lines = [];
    const out = new Output({ json, now: () => Date.UTC(2026, 0, 1, 12, 0, 5), stream: { write: (s) => lines.push(s) } });
    return { out, lines };
  };
  const job = { run_id: 'run_1', attempt: 2, phase: 'implementing', started_at_ms: Date.UTC(2026, 0, 1, 11, 58, 0) };

  it('a person reads the run, its phase, the elapsed time and the reason', () => {
    const { out, lines } = capture(false);
    out.run('run_ended', job, 'ended: failed (the agent exited with code 2)');
    expect(lines).toEqual(['12:00:05 run_1#2 [implementing] ended: failed (the agent exited with code 2) (2m05s)\n']);
  });

  it('--json prints one JSON object per line with the same facts', () => {
    const { out, lines } = capture(true);
    out.run('run_ended', job, 'ended: failed', { outcome: 'failed', reason: 'exit 2' });
    expect(lines).toHaveLength(1);
    expect(lines[0].endsWith('\n')).toBe(true);
    expect(JSON.parse(lines[0])).toMatchObject({
      event: 'run_ended', run_id: 'run_1', attempt: 2, phase: 'implementing', elapsed_ms: 125_000, outcome: 'failed', reason: 'exit 2',
    });
  });

  it('formats durations for people', () => {
    expect([0, 59_999, 60_000, 3_599_000, 3_600_000].map(formatDuration)).toEqual(['0s', '59s', '1m00s', '59m59s', '1h00m']);
  });
});
