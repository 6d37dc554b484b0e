// The e2b launcher end to end: the real `docket-runner listen --launcher e2b` against a real local
// Worker, its sandboxes made through the official SDK at a local E2B stand-in
// (runner-cli/test/helpers/fake-e2b.mjs): a run completes with its patch, and a cancel kills its sandbox.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakeE2b } from '../../runner-cli/test/helpers/fake-e2b.mjs';
import { agentScript, bareRepo, createOrg, dispatch, RunnerHome, removeTempDirs, tempDir, waitForRun } from './helpers.mjs';

/** @type {Awaited<ReturnType<typeof import('./helpers.mjs').startDocket>>} */
let docket;
/** @type {Awaited<ReturnType<typeof fakeE2b>>} */
let e2b;
const home = new RunnerHome();
const scratch = tempDir('scratch');

beforeAll(async () => {
  docket = await (await import('./helpers.mjs')).startDocket();
  e2b = await fakeE2b();
}, 120_000);

afterAll(async () => {
  await home.cleanup();
  await e2b?.close();
  await docket?.stop();
  removeTempDirs();
});

describe('docket-runner --launcher e2b against a local Docket', () => {
  it('completes a run in an E2B sandbox with its patch, and a cancel of the next one kills its sandbox', async () => {
    const org = await createOrg(docket, `org-e2b-${Math.random().toString(36).slice(2, 8)}`);
    const reg = home.run(['register', '--server', docket.url, '--token', org.registration, '--name', 'e2b-box', '--launcher', 'e2b']);
    expect(reg.code, reg.stderr + reg.stdout).toBe(0);
    const listener = home.listen(['--launcher', 'e2b', '--e2b-api-url', e2b.url, '--e2b-sandbox-url', e2b.url], { DOCKET_E2B_API_KEY: e2b.apiKey });

    const repo = bareRepo();
    const editor = agentScript(scratch, `
      import { appendFileSync } from 'node:fs';
      appendFileSync('README.md', 'from an e2b sandbox\\n');`);
    const run = await dispatch(docket, org.admin, { repository: { url: repo.url, commit: repo.commit }, launch: { protocol: 'e2b', command: [process.execPath, editor] } });
    const done = await waitForRun(docket, org.admin, run.id, (r) => r.state === 'completed', 90_000);
    expect(done.artifact.patch).toContain('+from an e2b sandbox');
    expect(done.artifact.source_revision).toBe(repo.commit);
    const first = [...e2b.sandboxes.values()].find((s) => s.metadata.docket_run_id === run.id);
    expect(first.metadata.docket_attempt).toBe('1');

    const waiter = agentScript(scratch, "console.log('waiting'); setInterval(() => {}, 1000);");
    const next = await dispatch(docket, org.admin, { launch: { protocol: 'e2b', command: [process.execPath, waiter] } });
    await listener.waitFor((e) => e.event === 'launched' && e.run_id === next.id, 90_000);
    const cancelledAtMs = Date.now();
    const cancel = await docket.api('POST', `/v1/runs/${next.id}/cancel`, { token: org.admin, body: { reason: 'e2b e2e cancel' } });
    expect(cancel.status).toBe(202);
    await waitForRun(docket, org.admin, next.id, (r) => r.state === 'cancelled', 30_000);
    const second = [...e2b.sandboxes.values()].find((s) => s.metadata.docket_run_id === next.id);
    await new Promise((r) => setTimeout(r, 100));
    expect(second.alive).toBe(false);
    expect(second.killedAtMs - cancelledAtMs).toBeLessThan(2_000);
    expect(e2b.alive()).toHaveLength(0);
    expect((await listener.kill('SIGTERM')).code).toBe(0);
  }, 240_000);
});
