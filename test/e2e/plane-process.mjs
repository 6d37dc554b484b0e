// The whole local plane as a process of its own: `wrangler dev --local` on a persisted state
// directory, in its own process group, so a test can SIGKILL it (wrangler and its workerd
// grandchild at once) and start it again on the same state. Its stdout is watched line by line:
// the Worker's structured log lines (src/lib/log.ts) reach subscribers as parsed objects.
import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { createServer } from 'node:net';
import { ROOT, sleep } from './helpers.mjs';
import { QUIET_ENV, WRANGLER } from './migrated-state.mjs';

/** A free TCP port on 127.0.0.1 (the plane keeps it across restarts). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = /** @type {import('node:net').AddressInfo} */ (srv.address());
      srv.close(() => resolve(port));
    });
  });
}

/**
 * A local Docket in a child process group. `start()` boots it and waits until it answers;
 * `kill()` sends SIGKILL to the whole group and waits until the port is closed.
 * @param {{ persist: string, port: number, vars: Record<string, string>, logFile: string }} opts
 */
export class Plane {
  constructor({ persist, port, vars, logFile }) {
    this.persist = persist;
    this.port = port;
    this.vars = vars;
    this.url = `http://127.0.0.1:${port}`;
    this.log = createWriteStream(logFile, { flags: 'a' });
    /** @type {import('node:child_process').ChildProcess | null} */
    this.child = null;
    /** @type {Set<(line: any) => void>} */
    this.subscribers = new Set();
    this.boots = 0;
    this.up = false;
  }

  /** Calls `fn` with every structured log line until the returned function is called. @param {(line: any) => void} fn */
  subscribe(fn) {
    this.subscribers.add(fn);
    return () => this.subscribers.delete(fn);
  }

  async start(timeoutMs = 90_000) {
    if (this.child) throw new Error('the plane is already running');
    const args = [WRANGLER, 'dev', '--local', '--persist-to', this.persist, '--port', String(this.port), '--ip', '127.0.0.1', '--test-scheduled'];
    for (const [k, v] of Object.entries(this.vars)) args.push('--var', `${k}:${v}`);
    // detached: the child leads a new process group, and workerd (its child) stays in it.
    const child = spawn(process.execPath, args, { cwd: ROOT, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...QUIET_ENV } });
    this.child = child;
    this.boots += 1;
    this.log.write(`\n==== boot ${this.boots} at ${new Date().toISOString()} (pid ${child.pid}) ====\n`);
    let rest = '';
    child.stdout?.setEncoding('utf8');
    child.stdout?.on('data', (d) => {
      this.log.write(d);
      rest += d;
      let i;
      while ((i = rest.indexOf('\n')) >= 0) {
        const line = rest.slice(0, i);
        rest = rest.slice(i + 1);
        if (!line.startsWith('{')) continue;
        let parsed;
        try {
          parsed = JSON.parse(line);
        } catch {
          continue;
        }
        for (const fn of [...this.subscribers]) fn(parsed);
      }
    });
    child.stderr?.on('data', (d) => this.log.write(d));
    const exited = new Promise((resolve) => child.on('exit', resolve));
    this.exited = exited;
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`wrangler dev exited while starting; see ${this.log.path}`);
      try {
        await fetch(`${this.url}/v1/runs`, { signal: AbortSignal.timeout(5_000) });
        this.up = true;
        return;
      } catch {
        await sleep(150);
      }
    }
    await this.kill();
    throw new Error(`the plane did not answer within ${timeoutMs} ms; see ${this.log.path}`);
  }

  /** kill -9 of wrangler and workerd together; resolves once the port no longer answers. */
  async kill() {
    const child = this.child;
    if (!child) return;
    this.up = false;
    try {
      process.kill(-(/** @type {number} */ (child.pid)), 'SIGKILL');
    } catch {
      // the group is already gone
    }
    await Promise.race([this.exited, sleep(10_000)]);
    this.child = null;
    // workerd dies with the group, but the test reads its files next: wait until none is left.
    for (let i = 0; i < 100 && groupExists(/** @type {number} */ (child.pid)); i++) await sleep(50);
    for (let i = 0; i < 100; i++) {
      try {
        await fetch(`${this.url}/`, { signal: AbortSignal.timeout(500) });
        await sleep(100);
      } catch {
        return;
      }
    }
    throw new Error(`port ${this.port} still answers after kill -9 of the plane`);
  }

  /** Fires the cron handler (wrangler dev --test-scheduled); false when the plane did not answer. */
  async tick() {
    try {
      const res = await fetch(`${this.url}/__scheduled?cron=*+*+*+*+*`, { signal: AbortSignal.timeout(10_000) });
      await res.text();
      return res.ok;
    } catch {
      return false;
    }
  }

  async close() {
    await this.kill();
    await new Promise((r) => this.log.end(r));
  }
}

/** Whether any process of the group still exists. @param {number} pgid */
function groupExists(pgid) {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}
