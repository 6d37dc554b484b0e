// The rough edges a new user meets first: a closed pipe on stdout, a mistyped flag, a second
// listen, `listen --label`, and the upgrade hint of a 426.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { heartbeatAnswer } from './helpers/answers.mjs';
import { fakeServer } from './helpers/fake-server.mjs';

const CLI = fileURLToPath(new URL('../bin/docket-runner.mjs', import.meta.url));
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
 * @param {string} dir @param {string[]} args @param {{ closeStdout?: boolean, timeoutMs?: number }} [opts]
 */
function cli(dir, args, { closeStdout = false, timeoutMs = 20_000 } = {}) {
  const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH, HOME: dir, DOCKET_RUNNER_HOME: dir }, stdio: ['ignore', 'pipe', 'pipe'] });
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
    expect(typo.stderr).toContain("Unknown option '--labels'. Did you mean --label?");
    expect((await cli(dir, ['listen', '--concurency', '2'])).stderr).toContain('Did you mean --concurrency?');
    // Nothing close: no guess.
    const far = await cli(dir, ['listen', '--zzz']);
    expect(far.code).toBe(2);
    expect(far.stderr).toContain("Unknown option '--zzz'");
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
    ];
    const server = await fakeServer(() => answers.shift());
    cleanups.push(server.close);
    const messages = [];
    for (let i = 0; i < 2; i++) {
      const r = await cli(home(server.url), ['register', '--json', '--server', server.url, '--token', 'dkt_r_x']);
      expect(r.code).toBe(1);
      messages.push(JSON.parse(r.stdout.trim().split('\n')[0]).message);
    }
    expect(messages[0]).toContain('is the token a registration token');
    expect(messages[1]).toContain('already used 1 of 1 times');
    expect(messages[1]).not.toContain('is the token a registration token');
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
});
