// The contract test of both ends: the real `docket-runner` talks to a local Docket through a
// recording proxy, and every exchange, the runner's and the API calls around it, is checked against
// the OpenAPI document the Worker serves. A field renamed on either side, a status or an error code
// the document does not declare, or a call to a path it does not describe fails here by name.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_SECRET, agentScript, bareRepo, CLI, RunnerHome, removeTempDirs, startDocket, tempDir, until,
} from './helpers.mjs';
import { ContractChecker } from './openapi-check.mjs';
import { startRecordingProxy } from './recording-proxy.mjs';

/** @type {Awaited<ReturnType<typeof startDocket>>} */
let docket;
/** @type {Awaited<ReturnType<typeof startRecordingProxy>>} */
let proxy;
/** @type {RunnerHome | undefined} */
let home;
const scratch = tempDir('contract');

beforeAll(async () => {
  docket = await startDocket();
  proxy = await startRecordingProxy(docket.url);
}, 120_000);

afterAll(async () => {
  await home?.cleanup();
  await proxy?.stop();
  await docket?.stop();
  removeTempDirs();
});

/**
 * One API call through the proxy, so it is recorded and checked too.
 * @param {string} method @param {string} path @param {{ token: string, body?: any, headers?: Record<string, string> }} o
 */
async function api(method, path, { token, body, headers = {} }) {
  const res = await fetch(proxy.url + path, {
    method,
    signal: AbortSignal.timeout(30_000),
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

/**
 * The CLI run to its end without blocking this process (the proxy answers it from here).
 * @param {RunnerHome} h @param {string[]} args
 */
function runCli(h, args) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: h.env(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** @param {string} admin @param {string} runId @param {(run: any) => boolean} pred */
async function waitForRun(admin, runId, pred, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  let run;
  while (Date.now() < deadline) {
    run = (await api('GET', `/v1/runs/${runId}`, { token: admin })).body;
    if (pred(run)) return run;
    await new Promise((r) => setTimeout(r, 300));
  }
  throw new Error(`run ${runId} did not reach the expected state; last seen ${JSON.stringify(run)}`);
}

/** @param {string} admin @param {any} launch */
async function dispatchRun(admin, launch, extra = {}) {
  const res = await api('POST', '/v1/runs', {
    token: admin,
    body: { brief: 'contract run', launch, ...extra },
    headers: { 'Idempotency-Key': `contract-${Math.random().toString(36).slice(2)}` },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

/** Whether a recorded exchange is the call `method` on a path like `pattern`, answered 2xx. */
const saw = (/** @type {any[]} */ xs, /** @type {string} */ method, /** @type {RegExp} */ pattern, pred = (/** @type {any} */ _x) => true) =>
  xs.some((x) => x.method === method && pattern.test(x.path.split('?')[0]) && x.status >= 200 && x.status < 300 && pred(x));

describe('the runner and the Worker keep the OpenAPI document', () => {
  it('every call of a registration, a completed, a failed and a cancelled run matches the document', async () => {
    // The organization and its tokens, through the proxy.
    const org = await api('POST', '/v1/orgs', { token: ADMIN_SECRET, body: { name: 'contract' } });
    expect(org.status, JSON.stringify(org.body)).toBe(201);
    const admin = org.body.token.token;
    const reg = await api('POST', '/v1/tokens', { token: admin, body: { kind: 'registration' } });
    expect(reg.status, JSON.stringify(reg.body)).toBe(201);

    // The runner registers and listens through the proxy: every call it makes is recorded.
    home = new RunnerHome();
    const registered = await runCli(home, ['register', '--server', proxy.url, '--token', reg.body.token, '--name', 'contract-box', '--label', 'linux']);
    expect(registered.code, registered.stderr + registered.stdout).toBe(0);
    const listener = home.listen(['--stop-grace-ms', '1000']);

    // A run that completes with output, a result and a patch.
    const repo = bareRepo();
    const agent = agentScript(scratch, `
      import { appendFileSync, writeFileSync } from 'node:fs';
      console.log('::phase implementing');
      console.log('contract agent at work');
      appendFileSync('README.md', 'contract\\n');
      writeFileSync(process.env.DOCKET_RESULT_FILE, JSON.stringify({ model: 'contract-model', limitations: [], cost_cents: 3 }));
    `);
    const done = await dispatchRun(admin, { protocol: 'process', command: [process.execPath, agent] }, {
      repository: { url: repo.url, commit: repo.commit }, labels: ['linux'],
    });
    const doneEnd = await listener.waitFor((e) => e.event === 'run_ended' && e.run_id === done.id, 60_000);
    expect(doneEnd.outcome).toBe('completed');
    expect((await waitForRun(admin, done.id, (r) => r.state === 'completed')).artifact.patch).toContain('+contract');

    // A run whose agent fails.
    const failing = await dispatchRun(admin, { protocol: 'process', command: [process.execPath, '-e', 'console.log("giving up"); process.exit(3)'] });
    const failEnd = await listener.waitFor((e) => e.event === 'run_ended' && e.run_id === failing.id, 60_000);
    expect(failEnd.outcome).toBe('failed');
    await waitForRun(admin, failing.id, (r) => r.state === 'failed');

    // A run whose checkout fails: the runner says launch-failed; the run is then cancelled (or has run out of attempts).
    const unlaunchable = await dispatchRun(admin, { protocol: 'process', command: [process.execPath, '-e', '0'] }, {
      repository: { url: join(scratch, 'missing.git'), commit: repo.commit },
    });
    await until(() => saw(proxy.exchanges, 'POST', new RegExp(`^/v1/runs/${unlaunchable.id}/attempts/\\d+/launch-failed$`)), 60_000);
    const stopUnlaunchable = await api('POST', `/v1/runs/${unlaunchable.id}/cancel`, { token: admin, body: {} });
    expect([200, 202, 409], JSON.stringify(stopUnlaunchable.body)).toContain(stopUnlaunchable.status);
    await waitForRun(admin, unlaunchable.id, (r) => r.state === 'cancelled' || r.state === 'failed');

    // A run cancelled while its agent works: the runner learns it from its lease and stops it.
    const waiting = agentScript(scratch, `
      console.log('::phase implementing');
      setInterval(() => console.log('still working'), 500);
    `);
    const cancelled = await dispatchRun(admin, { protocol: 'process', command: [process.execPath, waiting] });
    await listener.waitFor((e) => e.event === 'launched' && e.run_id === cancelled.id, 60_000);
    await waitForRun(admin, cancelled.id, (r) => r.state === 'implementing');
    const cancel = await api('POST', `/v1/runs/${cancelled.id}/cancel`, { token: admin, body: { reason: 'contract cancel' } });
    expect(cancel.status, JSON.stringify(cancel.body)).toBe(202);
    const cancelEnd = await listener.waitFor((e) => e.event === 'run_ended' && e.run_id === cancelled.id, 60_000);
    expect(cancelEnd.outcome).toBe('cancelled');
    await waitForRun(admin, cancelled.id, (r) => r.state === 'cancelled');

    // What a user reads afterwards, through the proxy too.
    expect((await api('GET', `/v1/runs/${done.id}/events?cursor=0&limit=100`, { token: admin })).status).toBe(200);
    expect((await api('GET', '/v1/runs?limit=10', { token: admin })).status).toBe(200);
    expect((await listener.kill('SIGTERM')).code).toBe(0);

    const doc = await (await fetch(`${docket.url}/v1/openapi.json`, { signal: AbortSignal.timeout(30_000) })).json();
    const checker = new ContractChecker(doc);
    const exchanges = [...proxy.exchanges];

    // The recording is the protocol, not a fragment of it.
    const runPath = (/** @type {string} */ tail) => new RegExp(`^/v1/runs/[^/]+/${tail}$`);
    expect(saw(exchanges, 'POST', /^\/v1\/runners\/register$/), 'register').toBe(true);
    expect(saw(exchanges, 'POST', /^\/v1\/runners\/claim$/, (x) => x.responseBody.includes(done.id)), 'a claim that granted a run').toBe(true);
    expect(saw(exchanges, 'POST', runPath('attempts/\\d+/launched')), 'launched').toBe(true);
    expect(saw(exchanges, 'POST', runPath('attempts/\\d+/lease')) || saw(exchanges, 'POST', runPath('reports')), 'a lease or a report').toBe(true);
    expect(saw(exchanges, 'POST', runPath('reports'), (x) => x.path.includes(done.id) && /"final"\s*:/.test(x.requestBody)), 'the final report').toBe(true);
    expect(saw(exchanges, 'POST', runPath('attempts/\\d+/launch-failed')), 'launch-failed').toBe(true);
    expect(saw(exchanges, 'POST', runPath('attempts/\\d+/stopped')), 'stopped').toBe(true);
    expect(saw(exchanges, 'POST', runPath('reports'), (x) => x.path.includes(failing.id) && /"final"\s*:/.test(x.requestBody)), 'the failed run\'s final report').toBe(true);

    // No answer is a server error: with CONTRACT_CHECK=enforce an answer the document does not describe becomes a 500.
    const broken = exchanges.filter((x) => x.status >= 500).map((x) => `${x.method} ${x.path} answered ${x.status}: ${x.responseBody.slice(0, 400)}`);
    expect(broken, 'server errors').toEqual([]);
    // Every call and its answer keep the document.
    const problems = checker.checkAll(exchanges);
    expect(problems, `${exchanges.length} recorded exchanges checked against /v1/openapi.json`).toEqual([]);
    // And a call the document does not describe would have been named.
    expect(checker.check({ method: 'POST', path: '/v1/runners/teleport', status: 200, responseBody: '{}', responseType: 'application/json' }))
      .toEqual(['POST /v1/runners/teleport: the document describes no such operation']);
  }, 240_000);
});
