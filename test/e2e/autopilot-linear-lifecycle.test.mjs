// The run-lifecycle acceptance scenarios of the scheduler and of publication with Linear as the
// tracker (../shared/spec/run-lifecycle.md, "Acceptance scenarios"; the GitHub tracker's are in
// scenario-scheduler.test.mjs and scenario-publication.test.mjs): issues are made ready through
// signed Linear webhooks (test/fake-linear/), their runs push to a local bare repository and their
// pull requests land on the GitHub fake. One Docket for the file: publication's scenarios first, each
// with its own issue, then the scheduler's, the second going on from the runs the first leaves.

import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatedToolAgent, pauseAcrossRestart, turnCountingAgent, waitForScheduler as waitForSchedulerOf } from './autopilot-helpers.mjs';
import { sleep, tempDir, waitForRun } from './helpers.mjs';
import { REPO, startLinearPlane } from './linear-plane.mjs';

// Quick retries of the pull request step, many of them: a test's outage outlasts several.
const VARS = { PUBLICATION_RETRY_MS: '1000', PUBLICATION_TRIES_MAX: '30', GITHUB_RETRIES: '1', GITHUB_RETRY_BASE_MS: '100', LINEAR_RETRIES: '1', LINEAR_RETRY_BASE_MS: '100' };

let plane;
/** Team PUB's project: its agent greets the world in the README and counts its coding turns. */
let publishing;
/** Team SCH's project: its agent's tool runs until the test lets it finish. */
let scheduling;
const greeter = turnCountingAgent(tempDir('greeter'));
const tool = gatedToolAgent(tempDir('tool'));

const run = async (id) => (await plane.docket.api('GET', `/v1/runs/${id}`, { token: plane.org.admin })).body;
const head = (branch) => spawnSync('git', ['--git-dir', plane.bare, 'rev-parse', '--verify', '--quiet', `refs/heads/${branch}`], { encoding: 'utf8' }).stdout.trim();

/** A new issue of `team` labelled ready by a person: its ticket once `pred` holds (by default, once it has its run). */
async function readyIssue(projectId, team, title, pred = (t) => t.run_id) {
  const issue = await plane.newIssue(team, title);
  const { deliveries } = await plane.linear.state.label(issue, 'ready', plane.alice());
  expect(deliveries.map((d) => d.answer.status)).toEqual([202]);
  return plane.ticketOf(projectId, issue, pred);
}

beforeAll(async () => {
  plane = await startLinearPlane(VARS, 'linear-lifecycle');
  publishing = await plane.project('PUB', greeter.script);
  scheduling = await plane.project('SCH', tool.script);
}, 180_000);

afterAll(async () => {
  await plane?.close();
});

describe('run-lifecycle acceptance scenarios of publication with Linear as the tracker', () => {
  let listener;
  beforeAll(() => {
    listener = plane.home.listen();
  });
  afterAll(async () => {
    await listener.kill('SIGTERM');
  });

  it('Crash after PR creation but before receipt persistence: recovery locates that PR and does not create another', async () => {
    const { github } = plane;
    github.publication.crashAfterPullCreation(1);
    const { run_id: runId } = await readyIssue(publishing, 'PUB', 'Greeting, answer lost');
    const done = await waitForRun(plane.docket, plane.org.admin, runId, (r) => r.state === 'completed' || r.state === 'failed', 120_000);
    expect(done.state, JSON.stringify(done)).toBe('completed');
    const branch = `docket/${runId}`;
    expect(done.publication.head_sha).toBe(head(branch));
    // The creation GitHub carried out but never answered happened; every later try found that pull request.
    const creations = github.requests.filter((r) => r.method === 'POST' && r.path === `/repos/${REPO}/pulls` && r.body?.head === branch);
    expect(creations[0].status).toBeNull();
    expect(creations.slice(1).every((r) => r.status === 422)).toBe(true);
    const pulls = github.publication.pulls(REPO).filter((p) => p.head === branch);
    expect(pulls).toHaveLength(1);
    expect(done.publication.pr).toMatchObject({ number: pulls[0].number });
    expect(greeter.codingTurns(runId)).toBe(1);
  }, 180_000);

  it('Pause after Git push and before PR creation: resume reconciles publication without another coding turn', async () => {
    const { github, docket, org } = plane;
    // GitHub's pull request endpoints are down after the push: the run waits in publishing, pushed.
    github.state.fail({ path: `/repos/${REPO}/pulls`, status: 503, message: 'Service Unavailable', times: 1_000 });
    const { run_id: runId } = await readyIssue(publishing, 'PUB', 'Greeting, GitHub down');
    const branch = `docket/${runId}`;
    const pushed = await waitForRun(docket, org.admin, runId, (r) => r.publication?.head_sha && r.publication.tries > 0, 120_000);
    expect(pushed).toMatchObject({ state: 'publishing', publication: { pr: null } });
    expect(head(branch)).toBe(pushed.publication.head_sha);
    // An operator stops it at this boundary, the deployment restarts while it is paused, GitHub comes back.
    await pauseAcrossRestart(docket, org.admin, runId, VARS, () => github.publication.clearFaults());
    const done = await waitForRun(docket, org.admin, runId, (r) => r.state === 'completed' || r.state === 'failed', 120_000);
    expect(done.state, JSON.stringify(done)).toBe('completed');
    expect(done.publication.head_sha).toBe(pushed.publication.head_sha);
    expect(greeter.codingTurns(runId)).toBe(1);
    expect(github.publication.pulls(REPO).filter((p) => p.head === branch)).toHaveLength(1);
  }, 240_000);
});

describe('run-lifecycle acceptance scenarios of the scheduler with Linear as the tracker', () => {
  const waitForScheduler = (pred) => waitForSchedulerOf(plane.docket, plane.org.admin, scheduling, pred);
  const schedulerOf = async () => (await plane.docket.api('GET', `/v1/autopilot/projects/${scheduling}/scheduler`, { token: plane.org.admin })).body;
  /** The runs the disable scenario leaves: one paused, one queued. */
  let left = null;

  it('Disable scheduler during tool execution: state remains pausing until execution settles; no new run starts', async () => {
    const { docket, org, home } = plane;
    const listener = home.listen();
    const first = await readyIssue(scheduling, 'SCH', 'Faster build');
    await waitForRun(docket, org.admin, first.run_id, (r) => r.state === 'implementing', 60_000);
    await tool.toolStarted();
    const second = await readyIssue(scheduling, 'SCH', 'Faster tests');
    expect((await run(second.run_id)).state).toBe('queued');

    const disabled = await docket.api('POST', `/v1/autopilot/projects/${scheduling}/scheduler/disable`, { token: org.admin });
    expect(disabled.status, JSON.stringify(disabled.body)).toBe(200);
    expect(disabled.body.paused).toEqual([first.run_id]);
    // The tool is still executing: the run stays pausing, holding its slot, for as long as it runs.
    await sleep(3_000);
    expect(await run(first.run_id)).toMatchObject({ state: 'pausing', hold: false, continuation: 'implementing' });
    const during = await schedulerOf();
    expect(during).toMatchObject({ enabled: false, concurrency: { in_use: 1 } });
    expect(during.concurrency.slots.map((s) => s.run_id)).toEqual([first.run_id]);
    // Admission is stopped too, with a visible reason.
    // (Its create delivery was refused first, as not ready: the label's is refused for the scheduler.)
    const third = await readyIssue(scheduling, 'SCH', 'Faster lint', (t) => t.reasons?.includes('scheduler disabled'));
    expect(third).toMatchObject({ status: 'refused', run_id: null, reasons: ['scheduler disabled'] });

    tool.letToolFinish();
    expect((await waitForRun(docket, org.admin, first.run_id, (r) => r.state === 'paused', 60_000)).hold).toBe(false);
    await listener.waitFor((e) => e.event === 'run_ended' && e.run_id === first.run_id, 60_000);
    // The runner is free and asks for work (longer than a claim long-poll): nothing new starts.
    await sleep(5_000);
    expect(await run(second.run_id)).toMatchObject({ state: 'queued', attempt: 0 });
    expect((await schedulerOf()).concurrency.in_use).toBe(0);
    expect(home.jobs().map((j) => j.run_id)).not.toContain(second.run_id);
    await listener.kill('SIGTERM');
    left = { paused: first.run_id, queued: second.run_id };
  }, 240_000);

  it('Enable scheduler: eligible paused work precedes new tickets and obeys remaining budget/capacity', async () => {
    expect(left, 'runs after the disable scenario').not.toBeNull();
    const { docket, org, home } = plane;
    const { paused, queued } = left;
    // The stopped runner's last long-poll outlives it by up to CLAIM_WAIT_MS: let it lapse first.
    await sleep(3_000);
    expect((await docket.api('POST', '/v1/credits/grants', { token: org.admin, body: { amount_cents: 1_000, note: 'scenario credit' } })).status).toBe(201);
    // One slot, and a budget for one run's reservation (each run costs 50 of its 60).
    const patched = await docket.api('PATCH', `/v1/autopilot/projects/${scheduling}/scheduler`, { token: org.admin, body: { concurrency: 1, budget: { limit_cents: 100, per_run_cents: 60 } } });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    const enabled = await docket.api('POST', `/v1/autopilot/projects/${scheduling}/scheduler/enable`, { token: org.admin });
    expect(enabled.status).toBe(200);
    expect(enabled.body.resumed).toEqual([paused]);
    const fresh = await readyIssue(scheduling, 'SCH', 'Faster deploys');
    expect(fresh.run_id).toMatch(/^run_/);
    for (const id of [paused, queued, fresh.run_id]) expect((await run(id)).state).toBe('queued');

    const listener = home.listen();
    // The paused run's continuation is handed out first, though both others are new work.
    expect((await listener.waitFor('claimed', 60_000)).run_id).toBe(paused);
    await waitForRun(docket, org.admin, paused, (r) => r.state === 'completed', 60_000);
    const spent = await waitForScheduler((v) => v.budget.spent_cents === 50);
    expect(spent.budget).toMatchObject({ held_cents: 0, spent_cents: 50, left_cents: 50 });
    expect(spent.verdicts.find((v) => v.gate === 'budget')).toMatchObject({ open: false });
    // What is left of the budget cannot cover another run: nothing else starts.
    await sleep(5_000);
    for (const id of [queued, fresh.run_id]) expect(await run(id)).toMatchObject({ state: 'queued', attempt: 0 });

    // A budget reset lets one more run start: the older new work, and only one at a time.
    expect((await docket.api('PATCH', `/v1/autopilot/projects/${scheduling}/scheduler`, { token: org.admin, body: { reset_budget: true } })).status).toBe(200);
    await waitForRun(docket, org.admin, queued, (r) => r.state === 'completed', 60_000);
    await waitForScheduler((v) => v.budget.spent_cents === 50 && v.budget.held_cents === 0);
    await sleep(3_000);
    expect(await run(fresh.run_id)).toMatchObject({ state: 'queued', attempt: 0 });
    expect(listener.events.filter((e) => e.event === 'claimed').map((e) => e.run_id)).toEqual([paused, queued]);
    expect((await docket.api('GET', '/v1/credits/audit', { token: org.admin })).body).toMatchObject({ ok: true, problems: [] });
    await listener.kill('SIGTERM');
  }, 300_000);
});
