// The rough edges a new user meets first: a closed pipe on stdout, a mistyped flag, a bad label,
// a second listen, `listen --label`, the upgrade hint of a 426, the hints and help texts, and a
// checkout whose runner was never built.
import { execFileSync, spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { heartbeatAnswer, MACHINE_ID, runnerConfig } from './helpers/answers.mjs';
import { fakeServer } from './helpers/fake-server.mjs';

const CLI = fileURLToPath(new URL('../bin/docket-runner.mjs', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const cleanups = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f();
});

/** A runner home with a hand-written registration. */
function home(serverUrl = 'http://127.0.0.1:9', extra = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'docket-cli-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ server_url: serverUrl, machine_id: 'mch_1', machine_token: 'dkt_s_t', ...extra }));
  return dir;
}

/**
 * Runs the CLI to its end. `closeStdout` closes our end of its stdout pipe at once, as `| head -1`
 * does once it has its line.
 * @param {string} dir @param {string[]} args @param {{ closeStdout?: boolean, timeoutMs?: number, env?: Record<string, string>, bin?: string }} [opts]
 */
function cli(dir, args, { closeStdout = false, timeoutMs = 20_000, env = {}, bin = CLI, cwd = undefined } = {}) {
  const child = spawn(process.execPath, [bin, ...args], {
    cwd, env: { PATH: process.env.PATH, HOME: dir, DOCKET_RUNNER_HOME: dir, ...env }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  if (closeStdout) child.stdout.destroy();
  else child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  return new Promise((resolve) => child.on('exit', (code, signal) => {
    clearTimeout(timer);
    resolve({ code, signal, stdout, stderr });
  }));
}

const ok = (body = {}) => ({ status: 200, body });

describe('the command line', () => {
  it('`status` into a pipe closed by its reader (`| head -1`) exits 0 without a stack trace', async () => {
    const dir = home();
    const r = await cli(dir, ['status'], { closeStdout: true });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  });

  it('a mistyped flag is refused with exit code 2, naming the flag it most likely meant', async () => {
    const dir = home();
    const typo = await cli(dir, ['register', '--labels', 'gpu']);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain("docket-runner register: unknown option '--labels'. Did you mean --label?");
    expect((await cli(dir, ['listen', '--concurency', '2'])).stderr).toContain('Did you mean --concurrency?');
    // Nothing close: no guess.
    const far = await cli(dir, ['listen', '--zzz']);
    expect(far.code).toBe(2);
    expect(far.stderr).toContain("unknown option '--zzz'");
    expect(far.stderr).not.toContain('Did you mean');
  });

  it('a second listen on a data directory in use is refused on stderr with exit code 4', async () => {
    const dir = home();
    mkdirSync(join(dir, 'data'), { recursive: true });
    // This test process holds the lock, as a running listener would.
    writeFileSync(join(dir, 'data', 'listen.lock'), JSON.stringify({ pid: process.pid, started_at_ms: Date.now() }));
    const r = await cli(dir, ['listen', '--json']);
    expect(r.code).toBe(4);
    expect(r.stdout).toBe('');
    const line = JSON.parse(r.stderr.trim().split('\n')[0]);
    expect(line).toMatchObject({ event: 'locked', pid: process.pid });
    expect(line.message).toContain('refusing to start');
  });

  it('`listen --label` is accepted and its labels go with every heartbeat', async () => {
    const server = await fakeServer(({ path }) => {
      if (path === '/v1/runners/heartbeat') return ok(heartbeatAnswer());
      if (path === '/v1/runners/claim') return { status: 204 };
      return { status: 404, body: { error: { code: 'not_found', message: '' } } };
    });
    cleanups.push(server.close);
    const dir = home(server.url, { labels: ['linux'] });
    const child = spawn(process.execPath, [CLI, 'listen', '--json', '--label', 'gpu', '--label', 'linux'], {
      env: { PATH: process.env.PATH, HOME: dir, DOCKET_RUNNER_HOME: dir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise((r) => child.on('exit', (code) => r(code)));
    const deadline = Date.now() + 15_000;
    while (!server.requests.some((r) => r.path === '/v1/runners/claim') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(stderr).toBe('');
    const hb = server.requests.find((r) => r.path === '/v1/runners/heartbeat');
    expect(hb.body).toMatchObject({ labels: ['gpu', 'linux'] });
    // The claim body stays as the protocol defines it.
    expect(server.requests.find((r) => r.path === '/v1/runners/claim').body.labels).toBeUndefined();
  });

  it('a 426 prints the upgrade hint the server sent, never an npm package name', async () => {
    const hint = 'download the runner from https://docket.example.com/runner.tgz and npm install -g it';
    const server = await fakeServer(() => ({
      status: 426,
      body: { error: { code: 'listener_upgrade_required', message: 'too old', min_cli_version: '9.0.0', protocols: ['process'], upgrade: hint } },
    }));
    cleanups.push(server.close);
    const r = await cli(home(server.url), ['listen', '--json']);
    expect(r.code).toBe(3);
    const upgrade = r.stdout.trim().split('\n').map((l) => JSON.parse(l)).find((e) => e.event === 'upgrade_required');
    expect(upgrade.upgrade).toBe(hint);
    expect(upgrade.message).toContain(hint);
    expect(upgrade.message).not.toContain('docket-runner@latest');
  });

  it('a refused registration asks whether the token is a registration token only when the server does not know it', async () => {
    const answers = [
      { status: 401, body: { error: { code: 'unauthorized', message: 'this call needs a runner registration token (a token starting dkt_r_)' } } },
      { status: 401, body: { error: { code: 'unauthorized', message: 'this registration token was already used 1 of 1 times', reason: 'used_up' } } },
      { status: 401, body: { error: { code: 'unauthorized', message: 'unknown runner registration token: this deployment issued no such token (check that it was copied whole)' } } },
    ];
    const server = await fakeServer(() => answers.shift());
    cleanups.push(server.close);
    const messages = [];
    for (let i = 0; i < 3; i++) {
      const r = await cli(home(server.url), ['register', '--json', '--server', server.url, '--token', 'dkt_r_x']);
      expect(r.code).toBe(1);
      messages.push(JSON.parse(r.stdout.trim().split('\n')[0]).message);
    }
    expect(messages[0]).toContain('is the token a registration token');
    expect(messages[1]).toContain('already used 1 of 1 times');
    expect(messages[1]).not.toContain('is the token a registration token');
    expect(messages[2]).toContain('this deployment issued no such token');
    expect(messages[2]).not.toContain('is the token a registration token');
  });

  it('a 426 without a hint points at the runner README, not at a package name', async () => {
    const server = await fakeServer(() => ({ status: 426, body: { error: { code: 'listener_upgrade_required', message: 'too old', min_cli_version: '9.0.0' } } }));
    cleanups.push(server.close);
    const r = await cli(home(server.url), ['register', '--json', '--server', server.url, '--token', 'dkt_r_x']);
    expect(r.code).toBe(3);
    const line = JSON.parse(r.stdout.trim().split('\n')[0]);
    expect(line.event).toBe('upgrade_required');
    expect(line.message).toContain('runner-cli/README.md');
    expect(line.message).not.toContain('docket-runner@latest');
  });

  it('a label the server would refuse stops `listen` and `register` with exit code 2 naming the option, before any call', async () => {
    const server = await fakeServer(() => ({ status: 500, body: { error: { code: 'internal', message: 'not expected' } } }));
    cleanups.push(server.close);
    const dir = home(server.url);
    const listen = await cli(dir, ['listen', '--label', 'a b']);
    expect(listen.code).toBe(2);
    expect(listen.stderr).toBe('docket-runner listen: --label: "a b" is not a label: labels are letters, digits and _ . : / -, at most 64 characters\n');
    const register = await cli(dir, ['register', '--server', server.url, '--token', 'dkt_r_x', '--label', 'a b']);
    expect(register.code).toBe(2);
    expect(register.stderr).toContain('docket-runner register: --label: "a b" is not a label');
    const fromEnv = await cli(dir, ['listen'], { env: { DOCKET_LABELS: 'linux,x!' } });
    expect(fromEnv.code).toBe(2);
    expect(fromEnv.stderr).toContain('docket-runner listen: DOCKET_LABELS: "x!" is not a label');
    expect(server.requests).toEqual([]);
  });

  it('a heartbeat or claim the server refuses as invalid (400) ends `listen` with exit code 2 and the server\'s message, not a retry loop', async () => {
    const invalid = { status: 400, body: { error: { code: 'invalid_request', message: 'body labels.0: labels are letters, digits and _ . : / -', field: 'labels.0' } } };
    const refusesHeartbeat = await fakeServer(() => invalid);
    cleanups.push(refusesHeartbeat.close);
    const r = await cli(home(refusesHeartbeat.url), ['listen', '--json', '--backoff-base-ms', '50']);
    expect(r.code).toBe(2);
    const events = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(events.some((e) => e.event === 'heartbeat_failed')).toBe(false);
    const refused = events.find((e) => e.event === 'bad_configuration');
    expect(refused).toMatchObject({ call: 'heartbeat', field: 'labels.0' });
    expect(refused.message).toContain('body labels.0: labels are letters, digits and _ . : / -');
    expect(refusesHeartbeat.requests).toHaveLength(1);

    const refusesClaim = await fakeServer(({ path }) => (path === '/v1/runners/heartbeat' ? ok(heartbeatAnswer()) : invalid));
    cleanups.push(refusesClaim.close);
    const c = await cli(home(refusesClaim.url), ['listen', '--json', '--backoff-base-ms', '50']);
    expect(c.code).toBe(2);
    expect(c.stdout).toContain('"event":"bad_configuration"');
    expect(refusesClaim.requests.filter((q) => q.path === '/v1/runners/claim')).toHaveLength(1);

    const refusesRegistration = await fakeServer(() => invalid);
    cleanups.push(refusesRegistration.close);
    const g = await cli(home(refusesRegistration.url), ['register', '--server', refusesRegistration.url, '--token', 'dkt_r_x']);
    expect(g.code).toBe(2);
    expect(g.stdout).toContain('the server refused the registration (400 invalid_request): body labels.0');
  });

  it('register tries again after a 503 (waiting as Retry-After asks) and registers; a server still unavailable after REGISTER_TRIES ends it with exit code 1', async () => {
    const unavailable = { status: 503, body: { error: { code: 'unavailable', message: 'restarting' } }, headers: { 'Retry-After': '1' } };
    const answers = [unavailable, ok({ machine_id: MACHINE_ID, machine_token: 'dkt_s_new', org_id: 'org_00000000000000000000000a', config: runnerConfig })];
    const recovers = await fakeServer(() => answers.shift());
    cleanups.push(recovers.close);
    const r = await cli(home(recovers.url), ['register', '--json', '--server', recovers.url, '--token', 'dkt_r_x']);
    expect(r.code).toBe(0);
    const events = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(events[0]).toMatchObject({ event: 'register_retry', status: 503, wait_ms: 1000 });
    expect(events[0].message).toContain('trying again in 1s (try 2 of 3)');
    expect(recovers.requests.filter((q) => q.path === '/v1/runners/register')).toHaveLength(2);

    const down = await fakeServer(() => ({ ...unavailable, headers: {} }));
    cleanups.push(down.close);
    const d = await cli(home(down.url), ['register', '--json', '--server', down.url, '--token', 'dkt_r_x']);
    expect(d.code).toBe(1);
    expect(down.requests).toHaveLength(3);
    expect(d.stdout).toContain('"event":"register_failed"');
  });

  it('register prints the command that starts the listener as the user ran it: the checkout\'s path, the same DOCKET_RUNNER_HOME or --config-dir', async () => {
    const server = await fakeServer(() => ok({ machine_id: MACHINE_ID, machine_token: 'dkt_s_new', org_id: 'org_00000000000000000000000a', config: runnerConfig }));
    cleanups.push(server.close);
    const register = ['register', '--server', server.url, '--token', 'dkt_r_x'];
    const hint = (r) => r.stdout.match(/Start it with `(.+)`\./)?.[1];
    const dir = home();
    // From the checkout's root, as README's `npm start` note runs it, with DOCKET_RUNNER_HOME set.
    const fromCheckout = await cli(dir, register, { cwd: ROOT });
    expect(fromCheckout.code).toBe(0);
    expect(hint(fromCheckout)).toBe(`DOCKET_RUNNER_HOME=${dir} node runner-cli/bin/docket-runner.mjs listen`);
    // The printed command, run in a shell without that variable, finds the registration.
    const status = execFileSync('sh', ['-c', hint(fromCheckout).replace(/ listen$/, ' status')], { cwd: ROOT, encoding: 'utf8', env: { PATH: process.env.PATH, HOME: dir } });
    expect(status).toContain(`(data ${join(dir, 'data')})`);
    // A --config-dir given to register goes into the hint; from elsewhere the bin is named by its absolute path.
    const elsewhere = join(dir, 'other home');
    const flagged = await cli(dir, ['register', '--config-dir', elsewhere, ...register.slice(1)], { cwd: dir });
    expect(hint(flagged)).toBe(`node ${CLI} listen --config-dir '${elsewhere}'`);
    // Neither: the default home, and the hint stays short; an installed `docket-runner` is named as such.
    const installed = join(dir, 'bin', 'docket-runner');
    mkdirSync(join(dir, 'bin'));
    symlinkSync(CLI, installed);
    const plain = await cli(dir, register, { bin: installed, env: { DOCKET_RUNNER_HOME: undefined } });
    expect(hint(plain)).toBe('docket-runner listen');
  });

  it('`status` is not stopped by a bad value of an option it does not use', async () => {
    const r = await cli(home(), ['status'], { env: { DOCKET_CONCURRENCY: '-1', DOCKET_LABELS: 'a b' } });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('no jobs yet');
    // listen uses it: there it is refused.
    const listen = await cli(home(), ['listen'], { env: { DOCKET_CONCURRENCY: '-1' } });
    expect(listen.code).toBe(2);
    expect(listen.stderr).toBe('docket-runner listen: DOCKET_CONCURRENCY: must be an integer of at least 1, got "-1"\n');
  });

  it('a config.json that is not valid JSON is said to be so, with the parse error', async () => {
    const dir = home();
    writeFileSync(join(dir, 'config.json'), '{"server_url": "http://x",');
    const r = await cli(dir, ['status']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^docket-runner status: .*config\.json is not valid JSON: .+\n$/);
  });

  it('the usage text starts its Configuration line at the margin; `daemon --help` lists its DOCKET_DAEMON_* limits with defaults', async () => {
    const usage = await cli(home(), ['--help']);
    expect(usage.stdout).toContain('\nConfiguration: flags, then DOCKET_* environment variables');
    const daemon = await cli(home(), ['daemon', '--help']);
    expect(daemon.code).toBe(0);
    for (const [name, dflt] of [['DOCKET_DAEMON_HEARTBEAT_MS', 30000], ['DOCKET_DAEMON_FINAL_TRIES', 8], ['DOCKET_DAEMON_CHECKPOINT_GRACE_MS', 60000]]) {
      expect(daemon.stdout).toMatch(new RegExp(`\\n  ${name} +.*; default ${dflt}\\n`));
    }
    expect(daemon.stdout.match(/DOCKET_DAEMON_\w+/g)).toHaveLength(12);
  });

  it('a runner that was never built says how to build it in one line, exit code 1', async () => {
    const dir = home();
    const bin = join(dir, 'runner', 'bin', 'docket-runner.mjs');
    mkdirSync(join(dir, 'runner', 'bin'), { recursive: true });
    copyFileSync(CLI, bin); // the same bin, with no dist/ beside it
    const r = await cli(dir, ['--version'], { bin });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('docket-runner: the CLI is not built (no runner-cli/dist); run `npm run build -w runner-cli` (or `npm ci`) at the repository root\n');
  });
});
