// `npm start`, the first command of the README, as a new user runs it: the migrations applied with
// one line about them, the note printed once the Worker answers, its commands run as printed (curl
// and the runner CLI, up to a first run taken and its output read), Ctrl-C stopping everything, and
// a second start on the same state finding the database up to date and the organization still there.
import { execFileSync, spawn } from 'node:child_process';
import { readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI, removeTempDirs, RunnerHome, ROOT, sleep, tempDir } from './helpers.mjs';
import { migratedState, QUIET_ENV } from './migrated-state.mjs';
import { readLastTick } from './plane-disk.mjs';
import { freePort } from './plane-process.mjs';

const ADMIN = 'start-test-secret';
const MIGRATIONS = readdirSync(join(ROOT, 'migrations')).filter((f) => f.endsWith('.sql')).sort();

/** `npm start` in a process group of its own (as a terminal runs it), its output collected. */
function npmStart(env) {
  const child = spawn('npm', ['start'], { cwd: ROOT, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...QUIET_ENV, ...env } });
  const run = { child, out: '', exited: new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal }))) };
  child.stdout.setEncoding('utf8').on('data', (d) => (run.out += d));
  child.stderr.setEncoding('utf8').on('data', (d) => (run.out += d));
  return run;
}

async function until(run, text, timeoutMs = 120_000) {
  const deadline = Date.now() + timeoutMs;
  while (!run.out.includes(text)) {
    if (run.child.exitCode !== null || run.child.signalCode !== null) throw new Error(`npm start exited before printing ${JSON.stringify(text)}:\n${run.out}`);
    if (Date.now() > deadline) throw new Error(`npm start did not print ${JSON.stringify(text)} within ${timeoutMs} ms:\n${run.out}`);
    await sleep(100);
  }
}

/** Ctrl-C: SIGINT to the whole foreground group. Answers how npm start ended. */
async function ctrlC(run) {
  process.kill(-run.child.pid, 'SIGINT');
  return Promise.race([run.exited, sleep(30_000).then(() => ({ code: 'still running' }))]);
}

/** The shell command of the note's numbered step `n`: its indented lines, joined as the shell would. */
function step(out, n) {
  const note = out.slice(out.indexOf('Docket is running at'));
  const lines = note.split('\n');
  const at = lines.findIndex((l) => l.trimStart().startsWith(`${n}. `));
  const body = [];
  for (const line of lines.slice(at + 1)) {
    if (!line.startsWith('    ')) break;
    body.push(line.trim());
  }
  return body.join('\n');
}

const sh = (command, env = {}) => execFileSync('sh', ['-c', command], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, ...env }, timeout: 60_000 });

describe('npm start', () => {
  const runs = [];
  const listeners = [];
  const home = new RunnerHome();
  afterAll(async () => {
    for (const pid of [...runs.map((run) => run.child.pid), ...listeners.map((l) => l.pid)]) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // already stopped
      }
    }
    await home.cleanup();
    removeTempDirs();
  });

  it('starts Docket on a fresh state, prints working commands once it answers, stops on Ctrl-C and keeps its state', async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const env = { PORT: String(port), PERSIST_TO: tempDir('start'), ADMIN_SECRET: ADMIN };

    const startedAt = Date.now();
    const first = npmStart(env);
    runs.push(first);
    await until(first, `Docket is running at ${base}`);
    // One line about the migrations instead of wrangler's tables, and the note after wrangler's start-up lines.
    expect(first.out).toContain(`Applied ${MIGRATIONS.length}: ${MIGRATIONS[0]} … ${MIGRATIONS[MIGRATIONS.length - 1]}.`);
    expect(first.out).not.toContain('┌');
    // Wrangler's table of every binding and variable is left out; one line says where they are.
    expect(first.out).not.toContain('Your Worker has access to the following bindings');
    expect(first.out).not.toContain('env.LEASE_TTL_MS');
    expect(first.out).toContain("The Worker's bindings and variables are in wrangler.toml");
    expect(first.out.indexOf(`Ready on ${base}`)).toBeGreaterThan(-1);
    expect(first.out.indexOf(`Ready on ${base}`)).toBeLessThan(first.out.indexOf('Docket is running at'));
    expect(first.out).toContain(`Operator secret (ADMIN_SECRET): ${ADMIN}`);

    // A second start on the same state, or on the port the first holds, refuses before it starts anything.
    const sameState = npmStart({ ...env, PORT: String(await freePort()) });
    runs.push(sameState);
    expect(await sameState.exited).toEqual({ code: 1, signal: null });
    expect(sameState.out).toMatch(new RegExp(`Another \`npm start\` \\(pid \\d+\\) operates the local state in ${env.PERSIST_TO}`));
    expect(sameState.out).not.toContain('Docket is running');
    const samePort = npmStart({ ...env, PERSIST_TO: tempDir('start-other') });
    runs.push(samePort);
    expect(await samePort.exited).toEqual({ code: 1, signal: null });
    expect(samePort.out).toContain(`Port ${port} on 127.0.0.1 is in use`);
    expect(samePort.out).not.toContain('Docket is running');

    // The note's commands, as printed: an organization, a registration token, a registered runner.
    const org = JSON.parse(sh(step(first.out, 1)));
    expect(org.token.token).toMatch(/^dkt_m_/);
    const registration = JSON.parse(sh(step(first.out, 2).replace('<admin token>', org.token.token)));
    expect(registration.token).toMatch(/^dkt_r_/);
    const [register, listen] = step(first.out, 3).split('\n');
    expect(register).toBe(`node runner-cli/bin/docket-runner.mjs register --server ${base} --token <registration token>`);
    expect(CLI.endsWith(join('runner-cli', 'bin', 'docket-runner.mjs'))).toBe(true);
    sh(register.replace('<registration token>', registration.token), { DOCKET_RUNNER_HOME: home.home });
    const runners = await (await fetch(`${base}/v1/runners`, { headers: { authorization: `Bearer ${org.token.token}` } })).json();
    expect(runners.runners).toHaveLength(1);

    // The runner listens as printed, takes the first run of step 4, and step 5 shows what it did.
    expect(listen).toBe('node runner-cli/bin/docket-runner.mjs listen');
    const listener = spawn('sh', ['-c', listen], { cwd: ROOT, detached: true, stdio: 'ignore', env: { ...process.env, DOCKET_RUNNER_HOME: home.home } });
    listeners.push(listener);
    const admin = (text) => text.replaceAll('<admin token>', org.token.token);
    const dispatched = JSON.parse(sh(admin(step(first.out, 4))));
    expect(dispatched.state).toBe('queued');
    const [showRun, showEvents] = step(first.out, 5).split('\n').map((line) => admin(line).replace('<run id>', dispatched.id));
    let run = JSON.parse(sh(showRun));
    for (let i = 0; i < 150 && run.state !== 'completed'; i++) {
      await sleep(200);
      run = JSON.parse(sh(showRun));
    }
    expect(run.state).toBe('completed');
    const { events } = JSON.parse(sh(showEvents));
    expect(events.filter((e) => e.type === 'run.output').flatMap((e) => e.data.lines)).toContain('hello');
    process.kill(-listener.pid, 'SIGKILL');

    expect(await ctrlC(first)).not.toEqual({ code: 'still running' });
    await expect(fetch(`${base}/healthz`, { signal: AbortSignal.timeout(2_000) })).rejects.toThrow();
    // The cron ticked once as the Worker answered, not a whole CRON_TICK_MS (60 s) later: a start
    // after an outage begins its recovery at once (the sweep row records the tick).
    expect(readLastTick(env.PERSIST_TO)).toBeGreaterThanOrEqual(startedAt);

    // Again on the same state: nothing to migrate, and the organization and its runner are there.
    const second = npmStart(env);
    runs.push(second);
    await until(second, `Docket is running at ${base}`);
    expect(second.out).toContain('The local database is up to date.');
    const again = await fetch(`${base}/v1/runners`, { headers: { authorization: `Bearer ${org.token.token}` } });
    expect(again.status).toBe(200);
    expect((await again.json()).runners.map((r) => r.id)).toEqual(runners.runners.map((r) => r.id));
    expect(await ctrlC(second)).not.toEqual({ code: 'still running' });
  }, 300_000);

  it('keeps Docket up, with no Broken pipe, when the reader of its output goes away (npm start | head)', async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const run = npmStart({ PORT: String(port), PERSIST_TO: tempDir('start-head'), ADMIN_SECRET: ADMIN });
    runs.push(run);
    let stderr = '';
    run.child.stderr.on('data', (d) => (stderr += d));
    await until(run, `Docket is running at ${base}`);
    // The reader has its lines and closes the pipe; every request after it is a line nobody reads.
    run.child.stdout.destroy();
    for (let i = 0; i < 20; i++) {
      expect((await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(10_000) })).status).toBe(200);
      await sleep(100);
    }
    expect(run.child.exitCode).toBeNull();
    expect(stderr).not.toMatch(/Broken pipe|EPIPE/);
    expect(await ctrlC(run)).not.toEqual({ code: 'still running' });
  }, 180_000);

  it('tries a failed migration run again up to MIGRATE_ATTEMPTS times, then refuses to start and says so', async () => {
    // A local database that is not one fails every migration run, the way a run that failed by
    // itself would fail once.
    const persist = tempDir('start-broken');
    migratedState(persist);
    const d1 = join(persist, 'v3', 'd1', 'miniflare-D1DatabaseObject');
    for (const file of readdirSync(d1).filter((f) => f !== 'metadata.sqlite' && f.includes('.sqlite'))) {
      rmSync(join(d1, file));
      if (file.endsWith('.sqlite')) writeFileSync(join(d1, file), 'not a database '.repeat(20));
    }
    const port = await freePort();
    const run = npmStart({ PORT: String(port), PERSIST_TO: persist, ADMIN_SECRET: ADMIN, MIGRATE_ATTEMPTS: '3' });
    runs.push(run);
    expect(await run.exited).toEqual({ code: 1, signal: null });
    expect(run.out).toContain('The D1 migrations failed (exit 1, attempt 1 of 3); applying them again…');
    expect(run.out).toContain('The D1 migrations failed (exit 1, attempt 2 of 3); applying them again…');
    expect(run.out).toContain('The D1 migrations failed (exit 1, attempt 3 of 3); Docket was not started.');
    expect(run.out).not.toContain('Starting the Worker');
    await expect(fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(2_000) })).rejects.toThrow();
  }, 120_000);

  it('stops a migration run that outlasts MIGRATE_TIMEOUT_MS and says so; a bad value is refused before anything runs', async () => {
    const persist = tempDir('start-slow');
    const port = await freePort();
    const bad = npmStart({ PORT: String(port), PERSIST_TO: persist, ADMIN_SECRET: ADMIN, MIGRATE_TIMEOUT_MS: 'soon' });
    runs.push(bad);
    expect(await bad.exited).toEqual({ code: 2, signal: null });
    expect(bad.out).toContain('MIGRATE_TIMEOUT_MS must be a whole number of milliseconds above 0, got "soon"');
    // No wrangler run starts and applies a migration within 5 ms.
    const slow = npmStart({ PORT: String(port), PERSIST_TO: persist, ADMIN_SECRET: ADMIN, MIGRATE_TIMEOUT_MS: '5', MIGRATE_ATTEMPTS: '1' });
    runs.push(slow);
    expect(await slow.exited).toEqual({ code: 1, signal: null });
    expect(slow.out).toContain('The D1 migrations failed (stopped after MIGRATE_TIMEOUT_MS=5, attempt 1 of 1); Docket was not started.');
    expect(slow.out).not.toContain('Starting the Worker');
  }, 120_000);
});
