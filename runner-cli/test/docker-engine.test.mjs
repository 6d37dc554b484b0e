// The docker launcher against a real Docker engine: the real runner CLI and a local Docket, each
// attempt a container of the agent image scripts/docker-engine.sh builds (node and git from this
// machine). Containers use the engine's bridge and reach the Docket through a relay on its gateway;
// nothing leaves the machine. Skipped, with a line saying why, where no engine can start.
import { createHash, randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allEvents, bareRepo, createOrg, RunnerHome, removeTempDirs, startDocket, until, waitForRun } from '../../test/e2e/helpers.mjs';
import { AGENT_IMAGE, containersCreated, containersOf, docker, dockerEngine, gatewayRelay } from './helpers/docker-engine.mjs';

const engine = dockerEngine();
if (!engine.ok) console.warn(`docker launcher tests skipped: no Docker engine (${engine.why}); .ci/run installs and starts one (scripts/docker-engine.sh)`);

const sha256 = (s) => createHash('sha256').update(s).digest('hex');

/** An agent that works until the file GO appears in its checkout, then writes CHANGED.txt. */
const WAITING_AGENT = `
  const fs = require('fs');
  console.log('::phase implementing');
  const t = setInterval(() => {
    if (!fs.existsSync('GO')) return;
    clearInterval(t);
    fs.unlinkSync('GO');
    fs.writeFileSync('CHANGED.txt', 'done\\n');
    console.log('agent done');
  }, 100);
`;

// Each test has its own runner (a runner home whose label only its runs name); they share one
// Docket and one image.
describe.skipIf(!engine.ok)('the docker launcher against a real engine', () => {
  /** @type {Awaited<ReturnType<typeof startDocket>>} */
  let docket;
  let org;
  let relay;
  /** @type {RunnerHome[]} */
  const homes = [];
  const runIds = [];

  beforeAll(async () => {
    docket = await startDocket();
    relay = await gatewayRelay(docket.url);
    org = await createOrg(docket);
  }, 120_000);

  afterAll(async () => {
    for (const home of homes) await home.cleanup();
    for (const id of runIds) for (const c of containersOf(id)) docker(['rm', '--force', c.id]);
    await relay?.close();
    await docket?.stop();
    removeTempDirs();
  });

  /**
   * A registered runner serving the docker launcher with the agent image, for the runs that name
   * its label; `listen(args)` starts it. Its listeners are killed after the file.
   */
  const dockerRunner = (label) => {
    const home = new RunnerHome();
    homes.push(home);
    const reg = home.run(['register', '--server', docket.url, '--token', org.registration, '--name', label, '--label', label]);
    if (reg.code !== 0) throw new Error(`docket-runner register exited ${reg.code}: ${reg.stderr}${reg.stdout}`);
    const listen = (args = []) => home.listen(['--launcher', 'docker', '--docker-image', AGENT_IMAGE, '--stop-grace-ms', '1000', ...args]);
    /** A run of `node -e <script>` in the agent image, for this runner. */
    const dockerRun = async (script, extra = {}) => {
      const body = { brief: 'docker e2e run', ...extra, labels: [label], launch: { protocol: 'docker', command: ['node', '-e', script], ...extra.launch } };
      const headers = { 'Idempotency-Key': `docker-e2e-${randomUUID()}` };
      // Tried again, under the same key, when the local Worker had closed the kept-alive connection.
      const post = () => docket.api('POST', '/v1/runs', { token: org.admin, body, headers });
      const res = await post().catch(post);
      if (res.status !== 201) throw new Error(`POST /v1/runs: ${res.status} ${JSON.stringify(res.body)}`);
      runIds.push(res.body.id);
      return res.body;
    };
    return { home, listen, dockerRun };
  };
  const outputOf = async (runId) => (await allEvents(docket, org.admin, runId)).filter((e) => e.type === 'run.output').flatMap((e) => e.data.lines);

  it('a run completes in a container with its patch, its output relayed and kept in sandbox.log, and the container removed', async () => {
    const { home, listen, dockerRun } = dockerRunner('docker-complete');
    const repo = bareRepo();
    const run = await dockerRun(`
      const fs = require('fs');
      console.log('::phase implementing');
      fs.appendFileSync('README.md', 'world\\n');
      console.log('agent in ' + process.cwd() + ' as uid ' + process.getuid());
      console.log('token visible to the agent: ' + (process.env.DOCKET_ATTEMPT_TOKEN ? 'yes' : 'no'));
      fs.writeFileSync(process.env.DOCKET_RESULT_FILE, JSON.stringify({ model: 'docker-model' }));
    `, { repository: { url: repo.url, commit: repo.commit } });
    const l = listen();
    const launched = await l.waitFor((e) => e.event === 'launched' && e.run_id === run.id, 60_000);
    const ended = await l.waitFor((e) => e.event === 'run_ended' && e.run_id === run.id, 60_000);
    expect(ended.outcome).toBe('completed');
    const done = await waitForRun(docket, org.admin, run.id, (r) => r.state === 'completed');
    expect(done.artifact.source_revision).toBe(repo.commit);
    expect(done.artifact.patch).toContain('+world');
    expect(done.artifact.model).toBe('docker-model');
    const lines = await outputOf(run.id);
    expect(lines).toContain(`agent in /workspace as uid ${process.getuid()}`);
    expect(lines).toContain('token visible to the agent: no');
    expect(docker(['ps', '--all', '--quiet', '--no-trunc', '--filter', `id=${launched.sandbox_id}`])).toBe('');
    expect(containersOf(run.id)).toEqual([]);
    expect(readFileSync(join(home.dataDir, 'jobs', run.id, '1', 'sandbox.log'), 'utf8')).toContain('agent in /workspace');
    await l.kill('SIGTERM');
  });

  it('a cancel stops the container and removes it', async () => {
    const { listen, dockerRun } = dockerRunner('docker-cancel');
    const run = await dockerRun('console.log("::phase implementing"); setInterval(() => {}, 1000);');
    const l = listen();
    const launched = await l.waitFor((e) => e.event === 'launched' && e.run_id === run.id, 60_000);
    await waitForRun(docket, org.admin, run.id, (r) => r.state === 'implementing');
    expect(containersOf(run.id)).toEqual([{ id: launched.sandbox_id, state: 'running' }]);
    const cancel = await docket.api('POST', `/v1/runs/${run.id}/cancel`, { token: org.admin, body: { reason: 'docker cancel' } });
    expect(cancel.status).toBe(202);
    const ended = await l.waitFor((e) => e.event === 'run_ended' && e.run_id === run.id);
    expect(ended.outcome).toBe('cancelled');
    expect(containersOf(run.id)).toEqual([]);
    await l.kill('SIGTERM');
  });

  it('a container that outlives its lifetime is stopped and removed, and the run fails with the reason', async () => {
    const { listen, dockerRun } = dockerRunner('docker-lifetime');
    const run = await dockerRun('console.log("::phase implementing"); setInterval(() => {}, 1000);');
    const l = listen(['--sandbox-lifetime-ms', '2000']);
    await l.waitFor((e) => e.event === 'launched' && e.run_id === run.id, 60_000);
    const failed = await waitForRun(docket, org.admin, run.id, (r) => r.state === 'failed');
    expect(failed.last_error).toContain('the sandbox lifetime of 2 s ran out');
    await l.waitFor((e) => e.event === 'run_ended' && e.run_id === run.id);
    expect(containersOf(run.id)).toEqual([]);
    await l.kill('SIGTERM');
  });

  it('kill -9 of the runner mid-run: the restarted runner finds the container by its labels and reattaches; none is created twice and none is left', async () => {
    const { home, listen, dockerRun } = dockerRunner('docker-restart');
    const since = Date.now() - 1000;
    const repo = bareRepo();
    const run = await dockerRun(WAITING_AGENT, { repository: { url: repo.url, commit: repo.commit } });
    const first = listen();
    const launched = await first.waitFor((e) => e.event === 'launched' && e.run_id === run.id, 60_000);
    await waitForRun(docket, org.admin, run.id, (r) => r.state === 'implementing');
    await first.kill('SIGKILL');
    expect(containersOf(run.id)).toEqual([{ id: launched.sandbox_id, state: 'running' }]); // it outlives its runner

    const second = listen();
    const resumed = await second.waitFor((e) => e.event === 'resumed' && e.run_id === run.id, 60_000);
    expect(resumed.sandbox_id).toBe(launched.sandbox_id);
    writeFileSync(join(home.dataDir, 'jobs', run.id, '1', 'work', 'GO'), 'go');
    const ended = await second.waitFor((e) => e.event === 'run_ended' && e.run_id === run.id, 60_000);
    expect(ended.outcome).toBe('completed');
    const done = await waitForRun(docket, org.admin, run.id, (r) => r.state === 'completed');
    expect(done.attempt).toBe(1);
    expect(done.artifact.patch).toContain('CHANGED.txt');
    expect(containersCreated(run.id, since)).toBe(1);
    expect(containersOf(run.id)).toEqual([]);
    await second.kill('SIGTERM');
  });

  it('a container that ended while its runner was down is removed by the restarted runner, its output kept in sandbox.log', async () => {
    const { home, listen, dockerRun } = dockerRunner('docker-away');
    const run = await dockerRun(WAITING_AGENT);
    const first = listen();
    await first.waitFor((e) => e.event === 'launched' && e.run_id === run.id, 60_000);
    await waitForRun(docket, org.admin, run.id, (r) => r.state === 'implementing');
    await first.kill('SIGKILL');
    // With no runner, the agent finishes and its daemon delivers the final report; the container stays, exited.
    writeFileSync(join(home.dataDir, 'jobs', run.id, '1', 'work', 'GO'), 'go');
    await waitForRun(docket, org.admin, run.id, (r) => r.state === 'completed', 60_000);
    await until(() => containersOf(run.id)[0]?.state === 'exited', 30_000);

    const second = listen();
    const ended = await second.waitFor((e) => e.event === 'run_ended' && e.run_id === run.id, 60_000);
    expect(ended.outcome).toBe('completed');
    expect(containersOf(run.id)).toEqual([]);
    expect(readFileSync(join(home.dataDir, 'jobs', run.id, '1', 'sandbox.log'), 'utf8')).toContain('agent done');
    await second.kill('SIGTERM');
  });

  it("an agent in the container cannot reach the runner's home, its machine token or its job database", async () => {
    const { home, listen, dockerRun } = dockerRunner('docker-boundary');
    const config = join(home.home, 'config.json');
    const machineToken = JSON.parse(readFileSync(config, 'utf8')).machine_token;
    const probes = [home.home, config, join(home.dataDir, 'jobs.sqlite'), home.dataDir];
    // A token-shaped canary in the brief, which the daemon hands the agent: the search finds it, so it would find the machine token.
    const canary = 'dkt_s_canary_in_the_brief';
    const run = await dockerRun(`
      const fs = require('fs');
      const crypto = require('crypto');
      for (const p of JSON.parse(process.env.PROBES)) {
        try { fs.statSync(p); console.log('probe ' + p + ': present'); } catch (e) { console.log('probe ' + p + ': ' + e.code); }
      }
      // Every token-shaped string in what the agent can read: the mounts, its own filesystem's
      // writable places, and every process's environment and command line in the container.
      const seen = new Set();
      let files = 0;
      const look = (file) => {
        try {
          const text = fs.readFileSync(file, 'latin1');
          files += 1;
          for (const m of text.match(/dkt_[a-z]_[A-Za-z0-9_-]+/g) ?? []) seen.add(crypto.createHash('sha256').update(m).digest('hex'));
        } catch {}
      };
      const walk = (dir, depth) => {
        let entries = [];
        try { entries = fs.readdirSync(dir, { withFileTypes: true }); } catch { return; }
        for (const e of entries) {
          const p = dir + '/' + e.name;
          if (e.isDirectory() && depth < 8) walk(p, depth + 1);
          else if (e.isFile() && fs.statSync(p).size < 1e6) look(p);
        }
      };
      for (const dir of ['/workspace', '/docket', '/opt', '/tmp', '/root', '/home', '/etc', '/var', '/run', '/mnt']) walk(dir, 0);
      for (const pid of fs.readdirSync('/proc').filter((p) => /^[0-9]+$/.test(p))) {
        look('/proc/' + pid + '/environ');
        look('/proc/' + pid + '/cmdline');
      }
      console.log('files read: ' + files);
      console.log('token hashes: ' + [...seen].join(' '));
    `, { brief: `find ${canary}`, launch: { env: { PROBES: JSON.stringify(probes) } } });
    const l = listen();
    const ended = await l.waitFor((e) => e.event === 'run_ended' && e.run_id === run.id, 60_000);
    expect(ended.outcome).toBe('completed');
    const lines = await outputOf(run.id);
    for (const p of probes) expect(lines).toContain(`probe ${p}: ENOENT`);
    expect(Number(lines.find((x) => x.startsWith('files read: '))?.slice('files read: '.length))).toBeGreaterThan(10);
    const hashes = lines.find((x) => x.startsWith('token hashes: ')).slice('token hashes: '.length).split(' ');
    expect(hashes).toContain(sha256(canary));
    expect(hashes).not.toContain(sha256(machineToken));
    await l.kill('SIGTERM');
  });
});
