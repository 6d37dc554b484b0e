// A running `docket-runner listen --json` child: its output as parsed events, awaitable.
// Shared by the runner's own tests and the end-to-end tests.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../../bin/docket-runner.mjs', import.meta.url));

/**
 * A runner home registered by a hand-written config file against `serverUrl`; removed by `cleanups`
 * (run in reverse order after each test, so after anything started in it later).
 * @param {string} serverUrl @param {string} prefix @param {Array<() => unknown>} cleanups
 */
export function configuredHome(serverUrl, prefix, cleanups) {
  const home = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(home, { recursive: true, force: true }));
  writeFileSync(join(home, 'config.json'), JSON.stringify({ server_url: serverUrl, machine_id: 'mch_1', machine_token: 'dkt_s_t' }));
  return home;
}

/**
 * Starts `docket-runner listen --json` in `home` with a quick backoff; `cleanups` gets its SIGKILL.
 * @param {string} home @param {string[]} args @param {Array<() => unknown>} cleanups
 */
export function spawnListen(home, args, cleanups) {
  const child = spawn(process.execPath, [CLI, 'listen', '--json', '--backoff-base-ms', '100', '--backoff-max-ms', '400', ...args], {
    env: { PATH: process.env.PATH, HOME: home, DOCKET_RUNNER_HOME: home },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const l = new Listener(child);
  cleanups.push(async () => {
    child.kill('SIGKILL');
    await l.exited;
  });
  return l;
}

/** @param {number} ms */
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A running `listen --json`: its output as parsed events. */
export class Listener {
  /** @param {import('node:child_process').ChildProcess} child */
  constructor(child) {
    this.child = child;
    /** @type {any[]} */
    this.events = [];
    this.stderr = '';
    /** @type {Array<() => void>} */
    this.waiters = [];
    let rest = '';
    child.stdout?.setEncoding('utf8');
    child.stdout?.on('data', (d) => {
      rest += d;
      let i;
      while ((i = rest.indexOf('\n')) >= 0) {
        const line = rest.slice(0, i);
        rest = rest.slice(i + 1);
        try {
          this.events.push(JSON.parse(line));
        } catch {
          this.events.push({ event: 'unparsed', message: line });
        }
        this.poke();
      }
    });
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (d) => (this.stderr += d));
    /** @type {Promise<{ code: number | null, signal: string | null }>} */
    /** How the child exited, once it has: its exit code or the signal that ended it. */
    this.exit = null;
    this.exited = new Promise((resolve) => child.on('exit', (code, signal) => {
      this.exit = { code, signal };
      resolve({ code, signal });
      this.poke();
    }));
    this.done = false;
    this.exited.then(() => (this.done = true));
  }

  poke() {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /**
   * Wait for an event matching `pred` (an event name, or a predicate).
   * @param {string | ((e: any) => boolean)} pred @param {number} [timeoutMs]
   */
  async waitFor(pred, timeoutMs = 30_000) {
    const match = typeof pred === 'string' ? (/** @type {any} */ e) => e.event === pred : pred;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.events.find(match);
      if (found) return found;
      if (this.done) throw new Error(`listener exited before the expected event; events: ${this.dump()}; stderr: ${this.stderr}`);
      if (Date.now() > deadline) throw new Error(`timed out waiting for an event; events: ${this.dump()}; stderr: ${this.stderr}`);
      await Promise.race([new Promise((r) => this.waiters.push(() => r(undefined))), sleep(250)]);
    }
  }

  dump() {
    return this.events.map((e) => `${e.event}: ${e.message}`).join('\n');
  }

  /** @param {NodeJS.Signals} sig */
  kill(sig = 'SIGTERM') {
    this.child.kill(sig);
    return this.exited;
  }
}

