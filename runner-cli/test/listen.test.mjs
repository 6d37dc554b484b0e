// `docket-runner listen` against a scripted server: the answers a real server gives only in bad
// weather (503s, 401s, task_gone in the middle of a run).
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { groupAlive } from '../src/procs.ts';
import { attemptAnswerBody, heartbeatAnswer, MACHINE_ID, RUN_ID } from './helpers/answers.mjs';
import { fakeServer } from './helpers/fake-server.mjs';
import { configuredHome, spawnListen } from './helpers/listener.mjs';

const CLI = fileURLToPath(new URL('../bin/docket-runner.mjs', import.meta.url));
const cleanups = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f();
});

/** Start listen --json against `url`, registered by a hand-written config file. */
function listen(url, args = []) {
  const home = configuredHome(url, 'docket-listen-', cleanups);
  // After the listener is killed (cleanups run in reverse), its sandboxes go too.
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
  const l = spawnListen(home, ['--stop-grace-ms', '500', ...args], cleanups);
  return Object.assign(l, { home });
}

/** Wait for a condition on the test server's side. */
async function until(cond, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}

const ok = (body = {}) => ({ status: 200, body });
const err = (status, code) => ({ status, body: { error: { code, message: `${code} from the test server` } } });

function claimOf(agentCommand) {
  return {
    run_id: RUN_ID, attempt: 1, attempt_token: 'dkt_a_t', lease_expires_at_ms: Date.now() + 5000, lease_ttl_ms: 5000,
    lease_refresh_ms: 300, launch_deadline_at_ms: Date.now() + 60_000, sandbox_lifetime_ms: 600_000, brief: 'test', repository: null,
    launch: { protocol: 'process', command: agentCommand, image: null, env: {} },
  };
}
const attemptAnswer = (over = {}) => ok(attemptAnswerBody(over));

describe('listen in bad weather', () => {
  it('backs off with bounded jitter on 503, 401 and network trouble, sending its version and protocols each time', async () => {
    let claims = 0;
    const server = await fakeServer(({ path }) => {
      if (path === '/v1/runners/heartbeat') return ok(heartbeatAnswer());
      if (path === '/v1/runners/claim') {
        claims += 1;
        if (claims <= 3) return err(503, 'internal');
        if (claims <= 5) return err(401, 'unauthorized');
        if (claims <= 6) return { status: 0 };
        return { status: 204 };
      }
      return err(404, 'not_found');
    });
    cleanups.push(server.close);
    // No pause between claims beyond the backoff, which is what this test measures.
    const l = listen(server.url, ['--claim-min-gap-ms', '0']);
    await l.waitFor((e) => e.event === 'claim_failed' && e.status === 401);
    await until(() => claims >= 8);
    const claimTimes = server.requests.filter((r) => r.path === '/v1/runners/claim').map((r) => r.at_ms);
    const gaps = claimTimes.slice(1, 5).map((t, i) => t - claimTimes[i]);
    for (const gap of gaps) {
      expect(gap).toBeGreaterThanOrEqual(45); // at least half of the 100 ms base (minus timer slack)
      expect(gap).toBeLessThan(400 + 300); // never above the 400 ms maximum (plus scheduling slack)
    }
    const claim = server.requests.find((r) => r.path === '/v1/runners/claim');
    expect(claim.body).toMatchObject({ cli_version: '0.1.0', protocols: ['process'] });
    expect(claim.auth).toBe('Bearer dkt_s_t');
    const failures = l.events.filter((e) => e.event === 'claim_failed');
    expect(failures.map((e) => e.status)).toEqual([503, 503, 503, 401, 401, 0]);
    // Each failure says when the claim is tried again, and it is not tried sooner.
    expect(failures.map((e) => e.failures)).toEqual([1, 2, 3, 4, 5, 6]);
    for (const [i, failure] of failures.entries()) {
      expect(failure.message).toContain(`; trying again in ${(failure.retry_in_ms / 1000).toFixed(1)} s`);
      expect(claimTimes[i + 1] - claimTimes[i]).toBeGreaterThanOrEqual(failure.retry_in_ms - 15);
    }
    expect(failures.at(-1).code).toBe('network');
    expect(failures.find((e) => e.status === 401).message).toContain('docket-runner register');
    expect((await l.kill('SIGTERM')).code).toBe(0);
  });

  it('a machine deregistered by an admin (401 machine_deregistered) says how to register again and exits 6', async () => {
    const server = await fakeServer(({ path }) => {
      if (path === '/v1/runners/heartbeat') return ok(heartbeatAnswer());
      if (path === '/v1/runners/claim') {
        return { status: 401, body: { error: { code: 'unauthorized', reason: 'machine_deregistered', message: 'this machine was deregistered' } } };
      }
      return err(404, 'not_found');
    });
    cleanups.push(server.close);
    const l = listen(server.url);
    const gone = await l.waitFor('deregistered');
    expect(gone.message).toContain('mch_1');
    expect(gone.message).toContain('docket-runner register');
    expect((await l.exited).code).toBe(6);
    expect(server.requests.filter((r) => r.path === '/v1/runners/claim')).toHaveLength(1);
  });

  it('a stop while its claim waits ends that claim at the server (claim/cancel), or says it could not', async () => {
    for (const cancelAnswer of [ok({ machine_id: MACHINE_ID, ended: 1 }), err(503, 'internal')]) {
      let release = () => {};
      const held = new Promise((r) => (release = () => r(undefined)));
      const server = await fakeServer(async ({ path }) => {
        if (path === '/v1/runners/heartbeat') return ok(heartbeatAnswer());
        if (path === '/v1/runners/claim') {
          await held; // a long-poll: no work comes
          return { status: 204 };
        }
        if (path === '/v1/runners/claim/cancel') return cancelAnswer;
        return err(404, 'not_found');
      });
      cleanups.push(server.close, release); // run in reverse: the held claim is answered, then the server closes
      const l = listen(server.url);
      await until(() => server.requests.some((r) => r.path === '/v1/runners/claim'));
      expect((await l.kill('SIGTERM')).code).toBe(0);
      const cancels = server.requests.filter((r) => r.path === '/v1/runners/claim/cancel');
      expect(cancels).toHaveLength(1);
      expect(cancels[0]).toMatchObject({ method: 'POST', body: {}, auth: 'Bearer dkt_s_t' });
      const failed = l.events.find((e) => e.event === 'claim_cancel_failed');
      if (cancelAnswer.status === 200) expect(failed).toBeUndefined();
      else expect(failed.message).toContain('queued again when its lease lapses');
      expect(l.events.at(-1).event).toBe('stopped');
    }
  });

  it('keeps the sandbox through 503s on the lease, and removes it only when the server says task_gone', async () => {
    let leases = 0;
    const agentDir = mkdtempSync(join(tmpdir(), 'docket-agent-'));
    cleanups.push(() => rmSync(agentDir, { recursive: true, force: true }));
    const agent = join(agentDir, 'agent.mjs');
    writeFileSync(agent, 'setInterval(() => {}, 1000);');
    let claimed = false;
    let launchedSeen = false;
    const server = await fakeServer(({ path, body }) => {
      if (path === '/v1/runners/heartbeat') return ok(heartbeatAnswer());
      if (path === '/v1/runners/claim') {
        if (claimed) return { status: 204 };
        claimed = true;
        return ok(claimOf([process.execPath, agent]));
      }
      if (path.endsWith('/launched')) {
        launchedSeen = true;
        return attemptAnswer();
      }
      if (path.endsWith('/lease')) {
        if (!launchedSeen) return attemptAnswer(); // the keepalive during a slow launch is not what this test counts
        leases += 1;
        if (leases <= 3) return err(503, 'internal');
        if (leases <= 4) return err(401, 'unauthorized');
        if (leases <= 6) return attemptAnswer();
        return err(410, 'task_gone');
      }
      if (path.endsWith('/reports')) return attemptAnswer();
      return err(404, 'not_found');
    });
    cleanups.push(server.close);
    const l = listen(server.url);
    const launched = await l.waitFor((e) => e.event === 'launched');
    const pid = Number(launched.sandbox_id.slice('process-'.length));
    await until(() => leases >= 5);
    expect(groupAlive(pid)).toBe(true); // 503 and 401 never destroy a workload
    expect(l.events.filter((e) => e.event === 'lease_retry')).toHaveLength(4);
    const ended = await l.waitFor('run_ended', 20_000);
    expect(ended.outcome).toBe('gone');
    expect(l.events.some((e) => e.event === 'destroying' && e.code === 'task_gone')).toBe(true);
    expect(groupAlive(pid)).toBe(false);
    expect(existsSync(join(l.home, 'data', 'jobs', RUN_ID, '1', 'work'))).toBe(false);
    expect(existsSync(join(l.home, 'data', 'jobs', RUN_ID, '1', 'sandbox.log'))).toBe(true); // kept for the log retention period
    expect(server.requests.some((r) => r.path.endsWith('/stopped'))).toBe(false); // nothing to report on a gone run
  });

  it('stops a sandbox that outlives its lifetime and reports it stopped with the reason', async () => {
    const agentDir = mkdtempSync(join(tmpdir(), 'docket-agent-'));
    cleanups.push(() => rmSync(agentDir, { recursive: true, force: true }));
    const agent = join(agentDir, 'agent.mjs');
    writeFileSync(agent, 'setInterval(() => {}, 1000);');
    let claimed = false;
    const server = await fakeServer(({ path }) => {
      if (path === '/v1/runners/heartbeat') return ok(heartbeatAnswer());
      if (path === '/v1/runners/claim') {
        if (claimed) return { status: 204 };
        claimed = true;
        return ok({ ...claimOf([process.execPath, agent]), sandbox_lifetime_ms: 1_000 });
      }
      if (path.endsWith('/stopped')) return attemptAnswer({ state: 'failed' });
      return attemptAnswer();
    });
    cleanups.push(server.close);
    const l = listen(server.url);
    const launched = await l.waitFor((e) => e.event === 'launched');
    const ended = await l.waitFor((e) => e.event === 'run_ended');
    expect(ended.outcome).toBe('failed');
    const stopped = server.requests.find((r) => r.path === `/v1/runs/${RUN_ID}/attempts/1/stopped`);
    expect(stopped.body).toEqual({ sandbox_id: launched.sandbox_id, reason: 'the sandbox lifetime of 1 s ran out' });
    expect(groupAlive(Number(launched.sandbox_id.slice(8)))).toBe(false);
  });

  it('a run whose reported cost is uncertain ends in the local cost-review state', async () => {
    const agentDir = mkdtempSync(join(tmpdir(), 'docket-agent-'));
    cleanups.push(() => rmSync(agentDir, { recursive: true, force: true }));
    const agent = join(agentDir, 'agent.mjs');
    writeFileSync(agent, `import { writeFileSync } from 'node:fs'; writeFileSync(process.env.DOCKET_RESULT_FILE, JSON.stringify({ cost_cents: 'about 3 dollars' }));`);
    let claimed = false;
    const server = await fakeServer(({ path, body }) => {
      if (path === '/v1/runners/heartbeat') return ok(heartbeatAnswer());
      if (path === '/v1/runners/claim') {
        if (claimed) return { status: 204 };
        claimed = true;
        return ok(claimOf([process.execPath, agent]));
      }
      if (path.endsWith('/reports') && body.final) return attemptAnswer({ state: 'completed' });
      return attemptAnswer();
    });
    cleanups.push(server.close);
    const l = listen(server.url);
    const review = await l.waitFor((e) => e.event === 'cost_review');
    expect(review.outcome).toBe('completed');
    const final = server.requests.find((r) => r.body?.final)?.body.final;
    expect(final.cost_cents).toBeNull(); // an unreadable cost is not made up
    const status = spawn(process.execPath, [CLI, 'status', '--json'], { env: { PATH: process.env.PATH, DOCKET_RUNNER_HOME: l.home } });
    let out = '';
    status.stdout.on('data', (d) => (out += d));
    await new Promise((r) => status.on('exit', r));
    const job = out.trim().split('\n').map((x) => JSON.parse(x)).find((x) => x.kind === 'job');
    expect(job).toMatchObject({ run_id: RUN_ID, state: 'cost-review', outcome: 'completed' });
  });
});
