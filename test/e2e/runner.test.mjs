// The runner CLI end to end: the real `docket-runner` as child processes against a real local
// Worker on loopback (shared/spec/dispatch-lifecycle.md, "How to test it", and its decisions).
import { existsSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  agentScript, allEvents, bareRepo, createOrg, dispatch, groupAlive, RunnerHome, removeTempDirs, sleep, startDocket, tempDir, waitForRun,
} from './helpers.mjs';

/** @type {Awaited<ReturnType<typeof startDocket>>} */
let docket;
/** @type {RunnerHome[]} */
let homes = [];
const scratch = tempDir('scratch');

beforeAll(async () => {
  docket = await startDocket();
}, 120_000);

afterEach(async () => {
  for (const h of homes) await h.cleanup();
  homes = [];
});

afterAll(async () => {
  await docket?.stop();
  removeTempDirs();
});

/** A registered runner home in a fresh organization. */
async function registeredRunner(name = 'e2e-box') {
  const org = await createOrg(docket, `org-${Math.random().toString(36).slice(2, 8)}`);
  const home = new RunnerHome();
  homes.push(home);
  const reg = home.run(['register', '--server', docket.url, '--token', org.registration, '--name', name, '--label', 'linux']);
  expect(reg.code, reg.stderr + reg.stdout).toBe(0);
  expect(statSync(home.home).mode & 0o777).toBe(0o700); // the machine token is the owner's alone
  expect(statSync(join(home.home, 'config.json')).mode & 0o777).toBe(0o600);
  return { org, home };
}

/** An agent that waits until the file `go` exists before finishing. */
function waitingAgent(goFile, { ignoreTerm = false } = {}) {
  return agentScript(scratch, `
    import { existsSync, statSync, writeFileSync } from 'node:fs';
    ${ignoreTerm ? "process.on('SIGTERM', () => console.log('agent ignores SIGTERM'));" : ''}
    console.log('::phase implementing');
    console.log('agent started in ' + process.cwd());
    const t = setInterval(() => {
      if (existsSync(${JSON.stringify(goFile)})) {
        clearInterval(t);
        writeFileSync('CHANGED.txt', 'done\\n');
        console.log('agent finished');
      }
    }, 100);
  `);
}

describe('docket-runner against a local Docket', () => {
  it('a run dispatched with no runner stays queued; a runner then claims it, relays its output and completes it with its patch', async () => {
    const { org, home } = await registeredRunner();
    const repo = bareRepo();
    const agent = agentScript(scratch, `
      import { readFileSync, writeFileSync, appendFileSync } from 'node:fs';
      console.log('::phase planning');
      console.log('reading the brief: ' + readFileSync(process.env.DOCKET_BRIEF_FILE, 'utf8'));
      console.log('::phase implementing');
      appendFileSync('README.md', 'world\\n');
      writeFileSync('NEW.txt', 'a new file\\n');
      console.log('::phase verifying');
      console.log('token visible to the agent: ' + (process.env.DOCKET_ATTEMPT_TOKEN ? 'yes' : 'no'));
      console.log('launch env: ' + process.env.DOCKET_JOB_ID + ' ' + process.env.TICKET + ' daemon grace ' + process.env.DOCKET_DAEMON_STOP_GRACE_MS);
      writeFileSync(process.env.DOCKET_RESULT_FILE, JSON.stringify({ model: 'e2e-model', limitations: ['made by a test'], cost_cents: 12 }));
    `);
    const run = await dispatch(docket, org.admin, {
      repository: { url: repo.url, commit: repo.commit },
      labels: ['linux'],
      launch: {
        protocol: 'process', command: [process.execPath, agent],
        env: { DOCKET_JOB_ID: 'job_e2e', TICKET: 'T-1', DOCKET_DAEMON_STOP_GRACE_MS: '1' },
      },
    });
    await sleep(2_500); // longer than a claim long-poll: nobody is there to take it
    const waiting = (await docket.api('GET', `/v1/runs/${run.id}`, { token: org.admin })).body;
    expect(waiting.state).toBe('queued');
    expect(waiting.attempt).toBe(0);

    const listener = home.listen();
    const ended = await listener.waitFor((e) => e.event === 'run_ended' && e.run_id === run.id, 60_000);
    expect(ended.outcome).toBe('completed');
    const done = await waitForRun(docket, org.admin, run.id, (r) => r.state === 'completed');
    expect(done.artifact.source_revision).toBe(repo.commit);
    expect(done.artifact.patch).toContain('+world');
    expect(done.artifact.patch).toContain('NEW.txt');
    expect(done.artifact.model).toBe('e2e-model');
    expect(done.artifact.limitations).toContain('made by a test');
    expect(done.cost_cents).toBe(12);

    const events = await allEvents(docket, org.admin, run.id);
    const lines = events.filter((e) => e.type === 'run.output').flatMap((e) => e.data.lines);
    expect(lines).toContain('reading the brief: e2e run');
    expect(lines).toContain('token visible to the agent: no');
    expect(lines).toContain('launch env: job_e2e T-1 daemon grace undefined');
    const phases = events.filter((e) => e.type === 'run.phase').map((e) => e.data.phase);
    expect(phases).toEqual(expect.arrayContaining(['planning', 'implementing', 'verifying']));

    // Readable progress in --json: claimed, launched, phases, the end with elapsed time.
    for (const name of ['claimed', 'launched', 'phase']) expect(listener.events.some((e) => e.event === name && e.run_id === run.id)).toBe(true);
    expect(typeof ended.elapsed_ms).toBe('number');
    const job = home.jobs().find((j) => j.run_id === run.id);
    expect(job).toMatchObject({ state: 'done', outcome: 'completed', attempt: 1 });

    const stop = await listener.kill('SIGTERM');
    expect(stop.code).toBe(0);
  });

  it('runs one job at a time by default, and two at once with --concurrency 2', async () => {
    const { org, home } = await registeredRunner();
    const go = join(scratch, `go-${Math.random()}`);
    const agent = waitingAgent(go);
    const runs = [];
    for (let i = 0; i < 3; i++) runs.push(await dispatch(docket, org.admin, { launch: { command: [process.execPath, agent] } }));
    const one = home.listen();
    await one.waitFor('launched');
    await sleep(2_500); // a claim long-poll and more: nothing else is taken while one job runs
    expect(one.events.filter((e) => e.event === 'claimed')).toHaveLength(1);
    await one.kill('SIGTERM'); // leaves the sandbox; the next start resumes it

    const two = home.listen(['--concurrency', '2']);
    await two.waitFor((e) => e.event === 'resumed');
    await two.waitFor((e) => e.event === 'launched');
    await sleep(2_500);
    expect(two.events.filter((e) => e.event === 'launched')).toHaveLength(1); // resumed one + one new = two at once
    writeFileSync(go, 'go');
    for (const run of runs) await waitForRun(docket, org.admin, run.id, (r) => r.state === 'completed', 60_000);
    await two.kill('SIGTERM');
  });

  it('a cancel during the run ends it cancelled and the sandbox process is gone', async () => {
    const { org, home } = await registeredRunner();
    const agent = waitingAgent(join(scratch, 'never'), { ignoreTerm: true });
    const run = await dispatch(docket, org.admin, { labels: [], launch: { command: [process.execPath, agent] } });
    const listener = home.listen(['--stop-grace-ms', '1000']);
    const launched = await listener.waitFor((e) => e.event === 'launched' && e.run_id === run.id);
    const pid = Number(String(launched.sandbox_id).replace('process-', ''));
    expect(groupAlive(pid)).toBe(true);
    await waitForRun(docket, org.admin, run.id, (r) => r.state === 'implementing');

    const cancel = await docket.api('POST', `/v1/runs/${run.id}/cancel`, { token: org.admin, body: { reason: 'e2e cancel' } });
    expect(cancel.status).toBe(202);
    const cancelled = await waitForRun(docket, org.admin, run.id, (r) => r.state === 'cancelled');
    expect(cancelled.state).toBe('cancelled');
    expect(groupAlive(pid)).toBe(false); // SIGTERM was ignored: the grace period ran out and SIGKILL followed
    const ended = await listener.waitFor((e) => e.event === 'run_ended' && e.run_id === run.id);
    expect(ended.outcome).toBe('cancelled');
    expect(listener.events.some((e) => e.event === 'stop_requested' && e.run_id === run.id)).toBe(true);
    await listener.kill('SIGTERM');
  });

  it('kill -9 of the runner mid-run, then a restart, reconciles the job and the run completes', async () => {
    const { org, home } = await registeredRunner();
    const go = join(scratch, `go-${Math.random()}`);
    const agent = waitingAgent(go);
    const run = await dispatch(docket, org.admin, { launch: { command: [process.execPath, agent] } });
    const first = home.listen();
    const launched = await first.waitFor((e) => e.event === 'launched' && e.run_id === run.id);
    const pid = Number(String(launched.sandbox_id).replace('process-', ''));
    await waitForRun(docket, org.admin, run.id, (r) => r.state === 'implementing');
    await first.kill('SIGKILL');
    expect(groupAlive(pid)).toBe(true); // the sandbox outlives its runner
    expect(home.jobs().find((j) => j.run_id === run.id)?.state).toBe('running');

    const second = home.listen();
    await second.waitFor((e) => e.event === 'reconciling');
    await second.waitFor((e) => e.event === 'resumed' && e.run_id === run.id);
    writeFileSync(go, 'go');
    const ended = await second.waitFor((e) => e.event === 'run_ended' && e.run_id === run.id, 60_000);
    expect(ended.outcome).toBe('completed');
    const done = await waitForRun(docket, org.admin, run.id, (r) => r.state === 'completed');
    expect(done.attempt).toBe(1); // never claimed twice
    expect(home.jobs().filter((j) => j.run_id === run.id)).toHaveLength(1);
    await second.kill('SIGTERM');
  });

  it('a cancel that arrives while the runner is down is carried out by the restarted runner', async () => {
    const { org, home } = await registeredRunner();
    const agent = waitingAgent(join(scratch, 'never'));
    const run = await dispatch(docket, org.admin, { launch: { command: [process.execPath, agent] } });
    const first = home.listen();
    const launched = await first.waitFor((e) => e.event === 'launched' && e.run_id === run.id);
    const pid = Number(String(launched.sandbox_id).replace('process-', ''));
    await waitForRun(docket, org.admin, run.id, (r) => r.state === 'implementing');
    await first.kill('SIGKILL');
    const cancel = await docket.api('POST', `/v1/runs/${run.id}/cancel`, { token: org.admin, body: {} });
    expect(cancel.status).toBe(202);
    expect(groupAlive(pid)).toBe(true);

    const second = home.listen(['--stop-grace-ms', '1000']);
    const ended = await second.waitFor((e) => e.event === 'run_ended' && e.run_id === run.id);
    expect(ended.outcome).toBe('cancelled');
    expect((await waitForRun(docket, org.admin, run.id, (r) => r.state === 'cancelled')).state).toBe('cancelled');
    expect(groupAlive(pid)).toBe(false);
    await second.kill('SIGTERM');
  });

  it('a sandbox that died while the runner was down is reported, and the run fails with the reason', async () => {
    const { org, home } = await registeredRunner();
    const agent = waitingAgent(join(scratch, 'never'));
    const run = await dispatch(docket, org.admin, { launch: { command: [process.execPath, agent] } });
    const first = home.listen();
    const launched = await first.waitFor((e) => e.event === 'launched' && e.run_id === run.id);
    const pid = Number(String(launched.sandbox_id).replace('process-', ''));
    await waitForRun(docket, org.admin, run.id, (r) => r.state === 'implementing');
    await first.kill('SIGKILL');
    process.kill(-pid, 'SIGKILL');

    const second = home.listen();
    await second.waitFor((e) => e.event === 'run_ended' && e.run_id === run.id);
    const failed = await waitForRun(docket, org.admin, run.id, (r) => r.state === 'failed');
    expect(failed.last_error).toContain('without delivering a final report');
    expect(home.jobs().find((j) => j.run_id === run.id)).toMatchObject({ state: 'done', outcome: 'failed' });
    await second.kill('SIGTERM');
  });

  it('a sandbox that outlives its lifetime is stopped and the run fails with the reason', async () => {
    const { org, home } = await registeredRunner();
    const agent = waitingAgent(join(scratch, 'never'));
    const run = await dispatch(docket, org.admin, { launch: { command: [process.execPath, agent] } });
    const listener = home.listen(['--sandbox-lifetime-ms', '1500']);
    const launched = await listener.waitFor((e) => e.event === 'launched' && e.run_id === run.id);
    const failed = await waitForRun(docket, org.admin, run.id, (r) => r.state === 'failed');
    expect(failed.last_error).toContain('the sandbox lifetime of 1.5 s ran out');
    expect(groupAlive(Number(String(launched.sandbox_id).replace('process-', '')))).toBe(false);
    await listener.kill('SIGTERM');
  });

  it('three launch failures end the run failed with the last error', async () => {
    const { org, home } = await registeredRunner();
    const run = await dispatch(docket, org.admin, { launch: { command: ['/nonexistent/docket-e2e-agent'] } });
    const listener = home.listen();
    const failed = await waitForRun(docket, org.admin, run.id, (r) => r.state === 'failed', 60_000);
    expect(failed.attempt).toBe(3);
    expect(failed.last_error).toContain('agent command not found: /nonexistent/docket-e2e-agent');
    expect(failed.steps).toHaveLength(3);
    const ends = listener.events.filter((e) => e.event === 'launch_failed' && e.run_id === run.id);
    expect(ends.map((e) => e.attempt)).toEqual([1, 2, 3]);
    const jobs = home.jobs().filter((j) => j.run_id === run.id);
    expect(jobs.map((j) => j.state)).toEqual(['done', 'done', 'done']);
    await listener.kill('SIGTERM');
  });

  it('a second listen on the same data directory refuses to start', async () => {
    const { home } = await registeredRunner();
    const first = home.listen();
    await first.waitFor('started');
    const second = home.run(['listen', '--json']);
    expect(second.code).toBe(4);
    expect(second.stdout).toBe(''); // the refusal is an error: stderr
    const line = JSON.parse(second.stderr.trim().split('\n')[0]);
    expect(line.event).toBe('locked');
    expect(line.pid).toBe(first.child.pid);
    expect(first.done).toBe(false);
    await first.kill('SIGTERM');
    expect(existsSync(join(home.dataDir, 'listen.lock'))).toBe(false);
  });
});
