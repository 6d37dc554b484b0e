// Acceptance scenarios of ../shared/spec/run-lifecycle.md: "Disable scheduler during tool execution:
// state remains pausing until execution settles; no new run starts" and "Enable scheduler: eligible
// paused work precedes new tickets and obeys remaining budget/capacity" (the second goes on from the
// runs the first leaves: one paused, one queued). A local Docket, the fake
// GitHub on loopback (admission through the project's signed webhook), a local bare repository as
// the remote (git's insteadOf points the issue's repository at it), the real runner CLI and a real
// agent script whose "tool" keeps running until the test lets it finish.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeAppKeyPair, startFakeGitHub } from '../fake-github/server.mjs';
import { deliverWebhook, examplePayload, gatedToolAgent, PERSON, waitForScheduler as waitForSchedulerOf, waitForTicket } from './autopilot-helpers.mjs';
import { bareRepo, createOrg, removeTempDirs, RunnerHome, sleep, startDocket, tempDir, waitForRun } from './helpers.mjs';

const REPO = 'acme/gadgets';
const WEBHOOK_SECRET = 'a-webhook-secret-for-the-scheduler-scenario';
const BRIEF = '## Agent Brief\n\ngoal: Make the build faster.\nacceptance:\n- the build takes less time\n';

/** @type {Awaited<ReturnType<typeof startDocket>>} */
let docket;
/** @type {Awaited<ReturnType<typeof startFakeGitHub>>} */
let github;
/** @type {{ admin: string, registration: string }} */
let org;
/** @type {string} */
let projectId;
const home = new RunnerHome();
/** The remote both scenarios' runs clone and push: a paused run's checkpoint is restored on it. */
/** @type {ReturnType<typeof bareRepo>} */
let repo;
/** An agent whose tool runs until the test lets it finish, then reports a result costing 50 cents. */
const agent = gatedToolAgent(tempDir('scratch'));

async function admitIssue(number) {
  github.state.addIssue(REPO, number, { title: `Issue ${number}`, body: BRIEF, labels: ['ready'] });
  github.state.label(REPO, number, 'ready', PERSON);
  const payload = examplePayload('issues', 'labeled', { repository: REPO, number });
  expect((await deliverWebhook(docket, projectId, 'issues', payload, { secret: WEBHOOK_SECRET })).status).toBe(202);
  return waitForTicket(docket, org.admin, projectId, number, (t) => t.run_id || t.status === 'refused', 30_000);
}

beforeAll(async () => {
  const keys = makeAppKeyPair();
  github = await startFakeGitHub({ appId: '1001', installationId: '2002', publicKey: keys.publicKey });
  docket = await startDocket();
  org = await createOrg(docket, 'scheduler-scenario');
  const created = await docket.api('POST', '/v1/autopilot/projects', {
    token: org.admin,
    body: {
      name: 'gadgets',
      repository: REPO,
      run: { launch: { protocol: 'process', command: [process.execPath, agent.script] }, labels: [] },
      webhook_secret: WEBHOOK_SECRET,
      github: { api_url: github.url, app_id: '1001', installation_id: '2002', private_key: keys.privateKey },
    },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  projectId = created.body.id;
  const reg = home.run(['register', '--server', docket.url, '--token', org.registration]);
  expect(reg.code, reg.stderr + reg.stdout).toBe(0);
}, 180_000);

afterAll(async () => {
  await home.cleanup();
  await docket?.stop();
  await github?.close();
  removeTempDirs();
});

describe('scheduler acceptance scenarios', () => {
  it('Disable scheduler during tool execution: state remains pausing until execution settles; no new run starts', async () => {
    repo = bareRepo();
    // GitHub reads run branches from the same bare repository the runner pushes to.
    github.publication.useBareRepository(REPO, repo.url);
    // The issue's repository (https://github.com/acme/gadgets) is cloned from the local bare repository.
    const listener = home.listen([], { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: `url.${repo.url}.insteadOf`, GIT_CONFIG_VALUE_0: `https://github.com/${REPO}` });

    const first = await admitIssue(41);
    await waitForRun(docket, org.admin, first.run_id, (r) => r.state === 'implementing', 60_000);
    await agent.toolStarted();
    const second = await admitIssue(42);
    expect((await docket.api('GET', `/v1/runs/${second.run_id}`, { token: org.admin })).body.state).toBe('queued');

    const disabled = await docket.api('POST', `/v1/autopilot/projects/${projectId}/scheduler/disable`, { token: org.admin });
    expect(disabled.status, JSON.stringify(disabled.body)).toBe(200);
    expect(disabled.body.paused).toEqual([first.run_id]);

    // The tool is still executing: the run stays pausing, holding its slot, for as long as it runs.
    await sleep(3_000);
    const pausing = (await docket.api('GET', `/v1/runs/${first.run_id}`, { token: org.admin })).body;
    expect(pausing).toMatchObject({ state: 'pausing', hold: false, continuation: 'implementing' });
    const during = (await docket.api('GET', `/v1/autopilot/projects/${projectId}/scheduler`, { token: org.admin })).body;
    expect(during).toMatchObject({ enabled: false, concurrency: { in_use: 1 } });
    expect(during.concurrency.slots.map((s) => s.run_id)).toEqual([first.run_id]);

    // Admission is stopped too, with a visible reason.
    const third = await admitIssue(43);
    expect(third).toMatchObject({ status: 'refused', run_id: null });
    expect(third.reasons).toEqual(['scheduler disabled']);

    agent.letToolFinish();
    const paused = await waitForRun(docket, org.admin, first.run_id, (r) => r.state === 'paused', 60_000);
    expect(paused.hold).toBe(false);
    await listener.waitFor((e) => e.event === 'run_ended' && e.run_id === first.run_id, 60_000);

    // The runner is free and asks for work (longer than a claim long-poll): nothing new starts.
    await sleep(5_000);
    const still = (await docket.api('GET', `/v1/runs/${second.run_id}`, { token: org.admin })).body;
    expect(still).toMatchObject({ state: 'queued', attempt: 0 });
    const after = (await docket.api('GET', `/v1/autopilot/projects/${projectId}/scheduler`, { token: org.admin })).body;
    expect(after.concurrency.in_use).toBe(0);
    expect(home.jobs().map((j) => j.run_id)).not.toContain(second.run_id);
    await listener.kill('SIGTERM');
    scenario = { paused: first.run_id, queued: second.run_id };
  }, 240_000);

  it('Enable scheduler: eligible paused work precedes new tickets and obeys remaining budget/capacity', async () => {
    expect(scenario, 'runs after the disable scenario').not.toBeNull();
    const { paused, queued } = scenario;
    // The stopped runner's last long-poll outlives it by up to CLAIM_WAIT_MS: let it lapse first, so
    // no run is handed to a runner that is gone (it would only come back after the launch deadline).
    await sleep(3_000);
    const grant = await docket.api('POST', '/v1/credits/grants', { token: org.admin, body: { amount_cents: 1_000, note: 'scenario credit' } });
    expect(grant.status).toBe(201);
    // One slot, and a budget for one run's reservation (each run costs 50 of its 60).
    const patched = await docket.api('PATCH', `/v1/autopilot/projects/${projectId}/scheduler`, { token: org.admin, body: { concurrency: 1, budget: { limit_cents: 100, per_run_cents: 60 } } });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);

    const enabled = await docket.api('POST', `/v1/autopilot/projects/${projectId}/scheduler/enable`, { token: org.admin });
    expect(enabled.status).toBe(200);
    expect(enabled.body.resumed).toEqual([paused]);
    const fresh = await admitIssue(44);
    expect(fresh.run_id).toMatch(/^run_/);
    for (const id of [paused, queued, fresh.run_id]) expect((await docket.api('GET', `/v1/runs/${id}`, { token: org.admin })).body.state).toBe('queued');

    const listener = home.listen([], { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: `url.${repo.url}.insteadOf`, GIT_CONFIG_VALUE_0: `https://github.com/${REPO}` });
    // The paused run's continuation is handed out first, though both others are new work waiting longer or as long.
    const claimed = await listener.waitFor('claimed', 60_000);
    expect(claimed.run_id).toBe(paused);
    await waitForRun(docket, org.admin, paused, (r) => r.state === 'completed', 60_000);
    const spent = await waitForScheduler((v) => v.budget.spent_cents === 50);
    expect(spent.budget).toMatchObject({ held_cents: 0, spent_cents: 50, left_cents: 50 });
    expect(spent.verdicts.find((v) => v.gate === 'budget')).toMatchObject({ open: false });

    // What is left of the budget cannot cover another run: nothing else starts.
    await sleep(5_000);
    for (const id of [queued, fresh.run_id]) expect((await docket.api('GET', `/v1/runs/${id}`, { token: org.admin })).body).toMatchObject({ state: 'queued', attempt: 0 });
    expect(listener.events.filter((e) => e.event === 'claimed').map((e) => e.run_id)).toEqual([paused]);

    // A budget reset lets one more run start: the older new work, and only one at a time.
    const reset = await docket.api('PATCH', `/v1/autopilot/projects/${projectId}/scheduler`, { token: org.admin, body: { reset_budget: true } });
    expect(reset.status).toBe(200);
    await waitForRun(docket, org.admin, queued, (r) => r.state === 'completed', 60_000);
    await waitForScheduler((v) => v.budget.spent_cents === 50 && v.budget.held_cents === 0);
    await sleep(5_000);
    expect((await docket.api('GET', `/v1/runs/${fresh.run_id}`, { token: org.admin })).body).toMatchObject({ state: 'queued', attempt: 0 });
    expect(listener.events.filter((e) => e.event === 'claimed').map((e) => e.run_id)).toEqual([paused, queued]);
    const audit = await docket.api('GET', '/v1/credits/audit', { token: org.admin });
    expect(audit.body).toMatchObject({ ok: true, problems: [] });
    await listener.kill('SIGTERM');
  }, 300_000);
});

/** @type {{ paused: string, queued: string } | null} */
let scenario = null;

const waitForScheduler = (pred) => waitForSchedulerOf(docket, org.admin, projectId, pred);
