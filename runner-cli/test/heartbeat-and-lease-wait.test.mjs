// An idle runner's claim is its heartbeat (no separate heartbeats between claims); a busy runner
// heartbeats; a running job holds one waiting lease call, whose stop answer stops the sandbox; and
// a runner that may have missed a pause (a restart, a lost answer) asks without waiting
// (docs/protocol.md, "Lease waits"). Counts of requests, never timings, are asserted.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { attemptAnswerBody, heartbeatAnswer, RUN_ID, runnerConfig } from './helpers/answers.mjs';
import { fakeServer } from './helpers/fake-server.mjs';
import { configuredHome, spawnListen } from './helpers/listener.mjs';

const cleanups = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f();
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const ok = (body = {}) => ({ status: 200, body });
/** Heartbeats every 200 ms, were they sent on the clock. */
const fastBeats = ok(heartbeatAnswer({ ...runnerConfig, heartbeat_interval_ms: 200 }));
const count = (server, path) => server.requests.filter((r) => r.path === path).length;

function listen(url, args = [], home = configuredHome(url, 'docket-beat-', cleanups)) {
  const l = spawnListen(home, ['--stop-grace-ms', '2000', ...args], cleanups);
  cleanups.push(() => {
    for (const e of l.events) {
      if (!e.sandbox_id?.startsWith('process-')) continue;
      try {
        process.kill(-Number(e.sandbox_id.slice('process-'.length)), 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });
  return l;
}

/** An agent script; after the test, any agent still running it is ended (it runs in a process group of its own). */
function agentFile(source) {
  const dir = mkdtempSync(join(tmpdir(), 'docket-agent-'));
  const path = join(dir, 'agent.mjs');
  cleanups.push(() => {
    spawnSync('pkill', ['-KILL', '-f', path]);
    rmSync(dir, { recursive: true, force: true });
  });
  writeFileSync(path, source);
  return path;
}

/**
 * An agent that, on SIGUSR1, writes its checkpoint and exits (runner-cli/README.md, "Pause");
 * `ready()` settles once it listens for the signal (it writes `ready` beside itself).
 */
function checkpointingAgent() {
  const path = agentFile(
    "import { writeFileSync } from 'node:fs';" +
      "process.on('SIGUSR1', () => { writeFileSync(process.env.DOCKET_CHECKPOINT_FILE, JSON.stringify({ session_id: 'sess-1', last_phase: 'implementing', pending_actions: [], session: { turns: 1 } })); process.exit(0); });" +
      "writeFileSync(new URL('./ready', import.meta.url), 'ready');" +
      'setInterval(() => {}, 1000);',
  );
  const readyFile = join(dirname(path), 'ready');
  const ready = async () => {
    for (let waited = 0; !existsSync(readyFile); waited += 20) {
      if (waited > 15_000) throw new Error('the agent did not start');
      await sleep(20);
    }
  };
  return { path, ready };
}

/** A claim answer that grants one run of `agent`, then no work. */
function claimOnce(agent) {
  let granted = false;
  return () => {
    if (granted) return { status: 204 };
    granted = true;
    return ok(grantOf([process.execPath, agent]));
  };
}

function grantOf(command) {
  return {
    run_id: RUN_ID, attempt: 1, attempt_token: 'dkt_a_t', lease_expires_at_ms: Date.now() + 5000, lease_ttl_ms: 5000,
    lease_refresh_ms: 300, launch_deadline_at_ms: Date.now() + 60_000, sandbox_lifetime_ms: 600_000, brief: 'test', repository: null,
    launch: { protocol: 'process', command, image: null, env: {} },
  };
}

describe('the claim is the heartbeat', () => {
  it('an idle runner sends its first heartbeat and then only claims', async () => {
    const server = await fakeServer(async ({ path }) => {
      if (path === '/v1/runners/heartbeat') return fastBeats;
      await sleep(700); // a long-poll that finds nothing
      return { status: 204 };
    });
    cleanups.push(server.close);
    const l = listen(server.url, ['--claim-min-gap-ms', '100']);
    await l.waitFor('started');
    const until = (n) => (async () => { while (count(server, '/v1/runners/claim') < n) await sleep(50); })();
    await until(5);
    // Before, a heartbeat went out every 200 ms beside the claims.
    expect(count(server, '/v1/runners/heartbeat')).toBe(1);
    expect((await l.kill('SIGTERM')).code).toBe(0);
  });

  it('a busy runner (at its concurrency, not claiming) sends heartbeats', async () => {
    const claim = claimOnce(agentFile('setInterval(() => {}, 1000);'));
    const server = await fakeServer(({ path }) => {
      if (path === '/v1/runners/heartbeat') return fastBeats;
      if (path === '/v1/runners/claim') return claim();
      return ok(attemptAnswerBody());
    });
    cleanups.push(server.close);
    const l = listen(server.url, ['--concurrency', '1']);
    await l.waitFor('launched');
    const before = count(server, '/v1/runners/heartbeat');
    while (count(server, '/v1/runners/heartbeat') < before + 2) await sleep(50);
    expect(count(server, '/v1/runners/claim')).toBe(1);
    // Lease calls answered at once (a server past LEASE_WAITERS_MAX does so) are paced by sleeping,
    // not by a loop that holds the event loop and piles up listeners until the next call is due.
    expect(l.stderr).toBe('');
  });
});

describe('lease waits', () => {
  it('a running job holds one waiting lease call, and a stop in its answer stops the sandbox', async () => {
    const agent = agentFile("process.on('SIGTERM', () => process.exit(0)); setInterval(() => {}, 1000);");
    const claim = claimOnce(agent);
    let releaseStop = () => {};
    const stopAsked = new Promise((r) => (releaseStop = r));
    let waiting = 0;
    let maxWaiting = 0;
    const server = await fakeServer(async ({ path, body }) => {
      if (path === '/v1/runners/heartbeat') return fastBeats;
      if (path === '/v1/runners/claim') return claim();
      if (path.endsWith('/stopped')) return ok(attemptAnswerBody({ state: 'cancelled', stop_requested: true }));
      if (!body?.wait_ms) return ok(attemptAnswerBody()); // the launch's keepalive does not wait
      // Waiting launched and lease calls are held until the test asks for a stop, as the server's are.
      waiting += 1;
      maxWaiting = Math.max(maxWaiting, waiting);
      await stopAsked;
      waiting -= 1;
      return ok(attemptAnswerBody({ stop_requested: true }));
    });
    cleanups.push(server.close);
    const l = listen(server.url, ['--concurrency', '1']);
    await l.waitFor('launched');
    while (waiting === 0) await sleep(50);
    const held = server.requests.filter((r) => r.path.includes('/attempts/') && r.body?.wait_ms);
    expect(held).toHaveLength(1);
    expect(held[0].path).toMatch(/\/launched$/);
    expect(held[0].body.wait_ms).toBe(300); // the grant's lease_refresh_ms
    releaseStop();
    const stopped = await l.waitFor('sandbox_stopped');
    expect(stopped.run_id).toBe(RUN_ID);
    const ended = await l.waitFor('run_ended');
    expect(ended.outcome).toBe('cancelled');
    expect(maxWaiting).toBe(1);
    expect(server.requests.filter((r) => r.path.endsWith('/stopped'))).toHaveLength(1);
  });
});

/**
 * A server with one run to grant, to an agent that checkpoints when asked; `run.pausing` is an
 * operator's pause. A waiting call is held for longer than the test runs, as a server holds it
 * until its wait ends. `loseFirstWait`: the pause lands during the first waiting call, whose answer
 * never reaches the runner.
 */
async function pausableRun({ loseFirstWait = false } = {}) {
  const agent = checkpointingAgent();
  const claim = claimOnce(agent.path);
  const run = { pausing: false };
  let release = () => {};
  const held = new Promise((r) => (release = r));
  const server = await fakeServer(async ({ path, body }) => {
    if (path === '/v1/runners/heartbeat') return fastBeats;
    if (path === '/v1/runners/claim') return claim();
    if (path.endsWith('/checkpoint')) return ok(attemptAnswerBody({ state: 'paused' }));
    if (body?.wait_ms && loseFirstWait && !run.pausing) {
      await agent.ready(); // a pause comes once the run is under way, not while its agent starts
      run.pausing = true;
      return { status: 0 };
    }
    const answer = run.pausing ? attemptAnswerBody({ state: 'pausing', pause_requested: true }) : attemptAnswerBody();
    if (body?.wait_ms) await held;
    return ok(answer);
  });
  cleanups.push(server.close);
  cleanups.push(() => release());
  return { server, run, agent };
}

describe('a pause the runner may have missed', () => {
  it('recorded while the runner was down, reaches the daemon as soon as the restarted runner resumes the job', async () => {
    const { server, run, agent } = await pausableRun();
    const home = configuredHome(server.url, 'docket-pause-', cleanups);
    const first = listen(server.url, [], home);
    await first.waitFor('launched');
    await agent.ready();
    await first.kill('SIGKILL'); // the sandbox outlives its runner
    run.pausing = true;

    const second = listen(server.url, [], home);
    await second.waitFor('resumed');
    expect((await second.waitFor('pause_requested', 15_000)).run_id).toBe(RUN_ID);
    expect((await second.waitFor('run_ended', 15_000)).outcome).toBe('paused');
    const checkpoints = server.requests.filter((r) => r.path.endsWith('/checkpoint'));
    expect(checkpoints).toHaveLength(1);
    expect(checkpoints[0].body).toMatchObject({ session_id: 'sess-1', last_phase: 'implementing' });
    expect(second.stderr).toBe(''); // no warning of listeners piling up while the next call is due
  });

  it('whose answer was lost, reaches the daemon with the next call, which does not wait', async () => {
    const { server } = await pausableRun({ loseFirstWait: true });
    const l = listen(server.url);
    expect((await l.waitFor('pause_requested', 15_000)).run_id).toBe(RUN_ID);
    expect((await l.waitFor('run_ended', 15_000)).outcome).toBe('paused');
    expect(l.stderr).toBe(''); // no warning of listeners piling up during the retry's backoff
  });
});
