// The e2b launcher, end to end on the runner's side: `docket-runner listen --launcher e2b` against a
// scripted Docket and a local E2B stand-in (helpers/fake-e2b.mjs) that the official SDK talks to.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox } from 'e2b';
import { afterEach, describe, expect, it } from 'vitest';
import { sandboxEnv } from '../src/launchers/common.ts';
import { attemptAnswerBody, heartbeatAnswer, RUN_ID, runnerConfig } from './helpers/answers.mjs';
import { fakeE2b } from './helpers/fake-e2b.mjs';
import { fakeServer } from './helpers/fake-server.mjs';
import { repoWithCheckout } from './helpers/git-remote.mjs';
import { configuredHome, spawnListen } from './helpers/listener.mjs';

const cleanups = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f();
});

const ok = (body = {}) => ({ status: 200, body });
const answer = (over = {}) => ok(attemptAnswerBody(over));
const config = { ...runnerConfig, protocols: ['process', 'docker', 'e2b'] };

function tmp(prefix) {
  const d = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

async function until(cond, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** An agent script; `body` runs with node's fs and path in scope. */
function agentScript(body) {
  const file = join(tmp('docket-e2b-agent-'), 'agent.mjs');
  writeFileSync(file, `import { writeFileSync, readFileSync, existsSync } from 'node:fs';\nimport { join } from 'node:path';\n${body}\n`);
  return [process.execPath, file];
}

function claimOf(command, over = {}) {
  return {
    run_id: RUN_ID, attempt: 1, attempt_token: 'dkt_a_secret_attempt_token', lease_expires_at_ms: Date.now() + 5000, lease_ttl_ms: 5000,
    lease_refresh_ms: 300, launch_deadline_at_ms: Date.now() + 60_000, sandbox_lifetime_ms: 600_000, brief: 'edit the readme', repository: null,
    launch: { protocol: 'e2b', command, image: null, env: { AGENT_SETTING: 'from-the-run' } }, ...over,
  };
}

/** A scripted Docket that hands out `claim` once; `on(path, body)` may answer a call first. */
async function docket(claim, on = () => null) {
  let claimed = false;
  const server = await fakeServer(({ path, body }) => {
    if (path === '/v1/runners/heartbeat') return ok(heartbeatAnswer(config));
    if (path === '/v1/runners/claim') {
      if (claimed || !claim) return { status: 204 };
      claimed = true;
      return ok(claim);
    }
    return on(path, body) ?? answer();
  });
  cleanups.push(server.close);
  return server;
}

/** The E2B stand-in, and `listen --launcher e2b` pointed at it with the key in its config file. */
async function e2bListen(server, { key, home } = {}) {
  const e2b = cleanups.e2b ?? (await fakeE2b());
  if (!cleanups.e2b) {
    cleanups.e2b = e2b;
    cleanups.push(async () => {
      delete cleanups.e2b;
      await e2b.close();
    });
  }
  const dir = home ?? configuredHome(server.url, 'docket-e2b-', cleanups);
  const file = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...file, e2b_api_key: key ?? e2b.apiKey }));
  const l = spawnListen(dir, ['--launcher', 'e2b', '--e2b-api-url', e2b.url, '--e2b-sandbox-url', e2b.url, '--stop-grace-ms', '500'], cleanups);
  return Object.assign(l, { home: dir, e2b });
}

describe('the e2b launcher', () => {
  it('runs the agent in an E2B sandbox on the checkout, delivers its patch, and kills the sandbox; the attempt token and the E2B key never enter it', async () => {
    const repo = repoWithCheckout(tmp('docket-e2b-repo-'));
    const agent = agentScript(`
      writeFileSync('README.md', 'edited in the sandbox\\n');
      writeFileSync(join(process.env.HOME, 'env.json'), JSON.stringify(process.env));
      writeFileSync(process.env.DOCKET_RESULT_FILE, JSON.stringify({ summary: 'done in e2b', cost_cents: 7 }));
      console.log('hello from the sandbox');`);
    const server = await docket(claimOf(agent, { repository: { url: repo.bare, commit: repo.base } }), (path, body) =>
      path.endsWith('/reports') && body.final ? answer({ state: 'completed' }) : null);
    const l = await e2bListen(server);
    const ended = await l.waitFor('run_ended', 30_000);
    expect(ended.outcome).toBe('completed');
    const final = server.requests.find((r) => r.body?.final)?.body.final;
    expect(final.artifact.patch).toContain('+edited in the sandbox');
    expect(final.artifact.source_revision).toBe(repo.base);
    const output = server.requests.filter((r) => r.path.endsWith('/reports')).flatMap((r) => r.body.lines ?? []);
    expect(output.join('\n')).toContain('hello from the sandbox');
    const [sbx, ...more] = l.e2b.sandboxes.values();
    expect(more).toHaveLength(0);
    expect(sbx.metadata).toEqual({ docket_run_id: RUN_ID, docket_attempt: '1', docket_machine: 'mch_1' });
    expect(sbx.timeoutS).toBe((600_000 + 60_000) / 1000);
    expect(l.events.find((e) => e.event === 'launched').sandbox_id).toBe(sbx.id);
    await until(() => !sbx.alive);
    const env = JSON.parse(readFileSync(join(sbx.home, 'env.json'), 'utf8'));
    expect(env.AGENT_SETTING).toBe('from-the-run');
    expect(env.DOCKET_RUN_ID).toBe(RUN_ID);
    const everything = JSON.stringify(env);
    expect(everything).not.toContain('dkt_a_secret_attempt_token');
    expect(everything).not.toContain(l.e2b.apiKey);
    expect(everything).not.toContain('dkt_s_t'); // the machine token
    expect(l.stderr + JSON.stringify(l.events)).not.toContain(l.e2b.apiKey);
  }, 60_000);

  it('a cancel of a running agent kills its sandbox within 2 s and is reported stopped', async () => {
    let stopAtMs = 0;
    let launched = false;
    const server = await docket(claimOf(agentScript('setInterval(() => {}, 1000);')), (path) => {
      launched ||= path.endsWith('/launched');
      if (path.endsWith('/lease') && launched) {
        stopAtMs ||= Date.now();
        return answer({ stop_requested: true });
      }
      if (path.endsWith('/stopped')) return answer({ state: 'cancelled' });
      return null;
    });
    const l = await e2bListen(server);
    const ended = await l.waitFor('run_ended', 30_000);
    expect(ended.outcome).toBe('cancelled');
    const [sbx] = l.e2b.sandboxes.values();
    expect(sbx.alive).toBe(false);
    expect(l.e2b.calls).toContain(`DELETE /sandboxes/${sbx.id}`);
    expect(sbx.killedAtMs - stopAtMs).toBeLessThan(2_000);
  }, 60_000);

  it('a sandbox that outlives the lifetime is stopped and reported stopped with the reason', async () => {
    const server = await docket({ ...claimOf(agentScript('setInterval(() => {}, 1000);')), sandbox_lifetime_ms: 1_500 }, (path) =>
      path.endsWith('/stopped') ? answer({ state: 'failed' }) : null);
    const l = await e2bListen(server);
    await l.waitFor('run_ended', 30_000);
    const stopped = server.requests.find((r) => r.path.endsWith('/stopped'));
    expect(stopped.body.reason).toBe('the sandbox lifetime of 1.5 s ran out');
    const [sbx] = l.e2b.sandboxes.values();
    expect(sbx.alive).toBe(false);
    expect(sbx.timeoutS).toBe(62); // E2B takes whole seconds: 1.5 s and the 60 s margin, rounded up
  }, 60_000);

  it('a sandbox E2B cannot create is a launch failure with its reason, and the runner goes on claiming', async () => {
    const server = await docket(claimOf(agentScript('')), (path) => (path.endsWith('/launch-failed') ? answer({ state: 'queued' }) : null));
    const e2b = await fakeE2b();
    cleanups.e2b = e2b;
    cleanups.push(async () => {
      delete cleanups.e2b;
      await e2b.close();
    });
    e2b.state.failCreate = { status: 500, message: 'no capacity in the cluster' };
    const l = await e2bListen(server);
    const ended = await l.waitFor('run_ended', 30_000);
    expect(ended.outcome).toBe('launch_failed');
    const failed = server.requests.find((r) => r.path.endsWith('/launch-failed'));
    expect(failed.body.error).toContain('no capacity in the cluster');
    const claimsBefore = server.requests.filter((r) => r.path === '/v1/runners/claim').length;
    await until(() => server.requests.filter((r) => r.path === '/v1/runners/claim').length > claimsBefore);
    expect(l.done).toBe(false);
  }, 60_000);

  it('a rejected API key stops the runner with a clear message before it claims anything', async () => {
    const server = await docket(claimOf(agentScript('')));
    const l = await e2bListen(server, { key: 'e2b_not_the_key' });
    const exit = await l.exited;
    expect(exit.code).toBe(2);
    const refused = l.events.find((e) => e.event === 'launcher_refused');
    expect(refused.message).toContain('E2B refused the API key');
    expect(server.requests.some((r) => r.path === '/v1/runners/claim')).toBe(false);
    expect(JSON.stringify(l.events)).not.toContain('e2b_not_the_key');
  }, 60_000);

  it('after a kill -9 the restarted runner reattaches to its live sandbox, creates none for the attempt, and kills a sandbox no job holds', async () => {
    const release = tmp('docket-e2b-release-');
    const agent = agentScript(`
      while (!existsSync(${JSON.stringify(join(release, 'go'))})) await new Promise((r) => setTimeout(r, 50));
      writeFileSync(process.env.DOCKET_RESULT_FILE, JSON.stringify({ summary: 'survived' }));`);
    const server = await docket(claimOf(agent), (path, body) => (path.endsWith('/reports') && body.final ? answer({ state: 'completed' }) : null));
    const first = await e2bListen(server);
    await first.waitFor('launched', 30_000);
    first.child.kill('SIGKILL');
    await first.exited;
    // A sandbox of this machine that no job holds (its runner died between create and recording).
    const conn = { apiKey: first.e2b.apiKey, apiUrl: first.e2b.url, sandboxUrl: first.e2b.url };
    const orphan = await Sandbox.create('base', { ...conn, metadata: { docket_run_id: 'run_0000000000000000000000ff', docket_attempt: '1', docket_machine: 'mch_1' } });
    const second = await e2bListen(server, { home: first.home });
    await second.waitFor('resumed', 30_000);
    await until(() => !first.e2b.sandboxes.get(orphan.sandboxId).alive);
    writeFileSync(join(release, 'go'), '');
    const ended = await second.waitFor('run_ended', 30_000);
    expect(ended.outcome).toBe('completed');
    const forAttempt = [...first.e2b.sandboxes.values()].filter((s) => s.metadata.docket_run_id === RUN_ID);
    expect(forAttempt).toHaveLength(1);
    await until(() => first.e2b.alive().length === 0);
  }, 60_000);

  it('a pause checkpoints the work out of the sandbox, and another runner resumes it in a new sandbox', async () => {
    const repo = repoWithCheckout(tmp('docket-e2b-repo-'));
    const before = agentScript(`
      writeFileSync('work.txt', 'before the pause\\n');
      process.on('SIGUSR1', () => {
        writeFileSync(process.env.DOCKET_CHECKPOINT_FILE, JSON.stringify({ session_id: 'sess-1', session: { turns: 2 } }));
        process.exit(0);
      });
      console.log('ready');
      setInterval(() => {}, 1000);`);
    let ready = false;
    const first = await docket(claimOf(before, { repository: { url: repo.bare, commit: repo.base } }), (path, body) => {
      ready ||= path.endsWith('/reports') && (body.lines ?? []).includes('ready');
      if (path.endsWith('/lease') && ready) return answer({ state: 'pausing', pause_requested: true });
      if (path.endsWith('/checkpoint')) return answer({ state: 'paused', lease_expires_at_ms: null });
      return null;
    });
    const a = await e2bListen(first);
    const paused = await a.waitFor('run_ended', 30_000);
    expect(paused.outcome).toBe('paused');
    const cp = first.requests.find((r) => r.path.endsWith('/checkpoint')).body;
    expect(cp.patch).toContain('+before the pause');
    expect(cp.session_id).toBe('sess-1');
    await until(() => a.e2b.alive().length === 0);

    const after = agentScript(`
      const resume = JSON.parse(readFileSync(process.env.DOCKET_RESUME_FILE, 'utf8'));
      writeFileSync('work.txt', readFileSync('work.txt', 'utf8') + 'after, in session ' + resume.session_id + '\\n');`);
    const checkpoint = { attempt: 1, session_id: cp.session_id, last_phase: null, pending_actions: [], session: JSON.stringify(cp.session),
      patch: cp.patch, source_revision: cp.source_revision, note: null, at_ms: Date.now() };
    const second = await docket(claimOf(after, { attempt: 2, repository: { url: repo.bare, commit: repo.base }, checkpoint }), (path, body) =>
      answer({ attempt: 2, ...(path.endsWith('/reports') && body.final ? { state: 'completed' } : {}) }));
    const b = await e2bListen(second);
    expect((await b.waitFor('run_ended', 30_000)).outcome).toBe('completed');
    const final = second.requests.find((r) => r.body?.final).body.final;
    expect(final.artifact.patch).toContain('+before the pause');
    expect(final.artifact.patch).toContain('+after, in session sess-1');
    expect([...b.e2b.sandboxes.values()].map((x) => x.metadata.docket_attempt)).toEqual(['1', '2']);
  }, 90_000);
});

describe('the e2b launcher and its configuration', () => {
  it('--pass-env never hands an E2B variable to the agent, the API key the SDK reads among them', () => {
    const env = sandboxEnv({ PATH: '/bin', E2B_API_KEY: 'e2b_secret', E2B_DOMAIN: 'e2b.example', TEAM_TOKEN: 't' }, ['E2B_API_KEY', 'E2B_DOMAIN', 'TEAM_TOKEN'], null, {});
    expect(env).toEqual({ PATH: '/bin', TEAM_TOKEN: 't' });
  });

  it('listen --launcher e2b without an E2B API key is refused as a bad configuration', async () => {
    const server = await docket(null);
    const home = configuredHome(server.url, 'docket-e2b-', cleanups);
    const l = spawnListen(home, ['--launcher', 'e2b'], cleanups);
    const exit = await l.exited;
    expect(exit.code).toBe(2);
    expect(l.stderr + JSON.stringify(l.events)).toContain('the e2b launcher needs an E2B API key');
    expect(existsSync(join(home, 'data', 'jobs'))).toBe(false);
  });
});
