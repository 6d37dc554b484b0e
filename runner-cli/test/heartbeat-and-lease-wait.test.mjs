// An idle runner's claim is its heartbeat (no separate heartbeats between claims); a busy runner
// heartbeats; and a running job holds one waiting lease call, whose stop answer stops the sandbox
// (docs/protocol.md, "Lease waits"). Counts of requests, never timings, are asserted.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

function listen(url, args = []) {
  const l = spawnListen(configuredHome(url, 'docket-beat-', cleanups), ['--stop-grace-ms', '2000', ...args], cleanups);
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

function agentFile(source) {
  const dir = mkdtempSync(join(tmpdir(), 'docket-agent-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'agent.mjs');
  writeFileSync(path, source);
  return path;
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
    const agent = agentFile('setInterval(() => {}, 1000);');
    let granted = false;
    const server = await fakeServer(({ path }) => {
      if (path === '/v1/runners/heartbeat') return fastBeats;
      if (path === '/v1/runners/claim') {
        if (granted) return { status: 204 };
        granted = true;
        return ok(grantOf([process.execPath, agent]));
      }
      return ok(attemptAnswerBody());
    });
    cleanups.push(server.close);
    const l = listen(server.url, ['--concurrency', '1']);
    await l.waitFor('launched');
    const before = count(server, '/v1/runners/heartbeat');
    while (count(server, '/v1/runners/heartbeat') < before + 2) await sleep(50);
    expect(count(server, '/v1/runners/claim')).toBe(1);
  });
});

describe('lease waits', () => {
  it('a running job holds one waiting lease call, and a stop in its answer stops the sandbox', async () => {
    const agent = agentFile("process.on('SIGTERM', () => process.exit(0)); setInterval(() => {}, 1000);");
    let granted = false;
    let releaseStop = () => {};
    const stopAsked = new Promise((r) => (releaseStop = r));
    let waiting = 0;
    let maxWaiting = 0;
    const server = await fakeServer(async ({ path, body }) => {
      if (path === '/v1/runners/heartbeat') return fastBeats;
      if (path === '/v1/runners/claim') {
        if (granted) return { status: 204 };
        granted = true;
        return ok(grantOf([process.execPath, agent]));
      }
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
