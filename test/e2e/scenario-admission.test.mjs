// The admission scenarios of ../shared/spec/run-lifecycle.md, "Acceptance scenarios", end to end:
// a local Docket, the real runner CLI working a real agent script, the real GitHub provider against
// the fake GitHub on loopback, and a local bare git repository as the project's remote.

import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { makeAppKeyPair, startFakeGitHub } from '../fake-github/server.mjs';
import { deliverWebhook, examplePayload, PERSON, readTicket, waitForDeliveries as waitForDeliveriesOf, waitForTicket as waitForTicketOf } from './autopilot-helpers.mjs';
import { agentScript, bareRepo, createOrg, RunnerHome, removeTempDirs, sleep, startDocket, tempDir, waitForRun } from './helpers.mjs';

const WEBHOOK_SECRET = 'a-webhook-secret-for-the-scenarios';
const BRIEF = '## Agent Brief\n\ngoal: Write the greeting file.\nacceptance:\n- GREETING.txt says hello\n';

/** @type {Awaited<ReturnType<typeof startDocket>>} */
let docket;
/** @type {Awaited<ReturnType<typeof startFakeGitHub>>} */
let github;
/** @type {{ admin: string, registration: string }} */
let org;
/** @type {{ privateKey: string, publicKey: string }} */
let keys;
/** @type {ReturnType<typeof bareRepo>} */
let remote;
/** @type {RunnerHome[]} */
let homes = [];
const scratch = tempDir('scenario');

/** An agent that writes a file in its checkout and finishes. */
const agent = () =>
  agentScript(scratch, `
    import { writeFileSync } from 'node:fs';
    console.log('::phase implementing');
    writeFileSync('GREETING.txt', 'hello\\n');
    console.log('agent wrote GREETING.txt');
  `);

/** A project on its own repository whose runs need `labels` and run the agent against the bare remote. */
async function project(repository, labels) {
  // GitHub reads the run's branch from the same bare repository the runner pushes to.
  github.publication.useBareRepository(repository, remote.url);
  const res = await docket.api('POST', '/v1/autopilot/projects', {
    token: org.admin,
    body: {
      name: repository,
      repository,
      run: { labels, launch: { command: [process.execPath, agent()] }, repository_url: remote.url },
      webhook_secret: WEBHOOK_SECRET,
      github: { api_url: github.url, app_id: '1001', installation_id: '2002', private_key: keys.privateKey },
    },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return { id: res.body.id, repository };
}

const payload = (event, action, repository, number) => examplePayload(event, action, { repository, number });

async function postWebhook(projectId, event, body, deliveryId = randomUUID()) {
  expect((await deliverWebhook(docket, projectId, event, body, { secret: WEBHOOK_SECRET, deliveryId })).status).toBe(202);
}

const reconcile = (projectId) => docket.api('POST', `/v1/autopilot/projects/${projectId}/reconcile`, { token: org.admin, body: {} });
const ticket = (projectId, number) => readTicket(docket, org.admin, projectId, number);
const waitForTicket = (projectId, number, pred) => waitForTicketOf(docket, org.admin, projectId, number, pred);
const waitForDeliveries = (runId, pred) => waitForDeliveriesOf(docket, org.admin, runId, pred);

/** Every run of the organization admitted for `repository#number`. */
async function runsOfTicket(repository, number) {
  const res = await docket.api('GET', '/v1/runs?limit=200', { token: org.admin });
  expect(res.status).toBe(200);
  // List items carry no metadata: each run is read whole.
  const runs = await Promise.all(res.body.runs.map(async (r) => (await docket.api('GET', `/v1/runs/${r.id}`, { token: org.admin })).body));
  return runs.filter((r) => r.metadata?.autopilot_ticket === `github:${repository}#${number}`);
}

/** A runner machine registered in the organization with `labels`, listening. */
function listeningRunner(labels) {
  const home = new RunnerHome();
  homes.push(home);
  const reg = home.run(['register', '--server', docket.url, '--token', org.registration, '--name', `box-${homes.length}`, ...labels.flatMap((l) => ['--label', l])]);
  expect(reg.code, reg.stderr + reg.stdout).toBe(0);
  return { home, listener: home.listen() };
}

beforeAll(async () => {
  keys = makeAppKeyPair();
  github = await startFakeGitHub({ appId: '1001', installationId: '2002', publicKey: keys.publicKey });
  docket = await startDocket();
  org = await createOrg(docket, 'scenarios');
  remote = bareRepo();
}, 120_000);

afterEach(async () => {
  for (const h of homes) await h.cleanup();
  homes = [];
});

afterAll(async () => {
  await docket?.stop();
  await github?.close();
  removeTempDirs();
});

describe('run-lifecycle acceptance scenarios: admission', () => {
  it('Duplicate webhook plus concurrent reconciliation admits one run.', async () => {
    const repo = 'acme/duplicates';
    const p = await project(repo, ['scenario-one']);
    github.state.addIssue(repo, 1, { title: 'Greeting', body: BRIEF, labels: ['ready'] });
    github.state.label(repo, 1, 'ready', PERSON);
    const labeled = payload('issues', 'labeled', repo, 1);
    const deliveryId = randomUUID();
    // GitHub retries the delivery while the cron's reconciliation and an operator's run at once.
    await Promise.all([
      postWebhook(p.id, 'issues', labeled, deliveryId),
      postWebhook(p.id, 'issues', labeled, deliveryId),
      postWebhook(p.id, 'issues', labeled),
      reconcile(p.id),
      reconcile(p.id),
    ]);
    const admitted = await waitForTicket(p.id, 1, (t) => t.run_id);
    await reconcile(p.id);
    expect((await runsOfTicket(repo, 1)).map((r) => r.id)).toEqual([admitted.run_id]);

    // The one run is worked once, by the real runner, and the issue never gets a second.
    const { home } = listeningRunner(['scenario-one']);
    const done = await waitForRun(docket, org.admin, admitted.run_id, (r) => ['completed', 'failed'].includes(r.state), 180_000);
    expect(done.state, JSON.stringify(done)).toBe('completed');
    expect(done.attempt).toBe(1);
    expect(done.artifact?.patch ?? '').toContain('GREETING.txt');
    await postWebhook(p.id, 'issues', labeled, deliveryId);
    await reconcile(p.id);
    expect((await runsOfTicket(repo, 1)).map((r) => r.id)).toEqual([admitted.run_id]);
    expect(home.jobs().filter((j) => j.run_id === admitted.run_id)).toHaveLength(1);
  }, 240_000);

  it('An unrelated comment on a completed issue does not create another run.', async () => {
    const repo = 'acme/comments';
    const p = await project(repo, ['scenario-two']);
    github.state.addIssue(repo, 2, { title: 'Greeting', body: BRIEF, labels: ['ready'] });
    github.state.label(repo, 2, 'ready', PERSON);
    await postWebhook(p.id, 'issues', payload('issues', 'labeled', repo, 2));
    const admitted = await waitForTicket(p.id, 2, (t) => t.run_id);
    listeningRunner(['scenario-two']);
    const ended = await waitForRun(docket, org.admin, admitted.run_id, (r) => r.state === 'completed', 180_000);
    // Completed means published: one pull request for the run's branch.
    expect(github.publication.pulls(repo).filter((p) => p.head === `docket/${admitted.run_id}`)).toHaveLength(1);
    expect(ended.artifact?.patch ?? '').toContain('GREETING.txt');

    // The published run moved the issue to review (ready label off); then a person comments and
    // edits it, and reconciliation runs.
    await waitForDeliveries(admitted.run_id, (ds) => ds.some((d) => d.kind === 'review_label' && d.status === 'delivered'));
    expect(github.state.issue(repo, 2).labels).toEqual(['needs-review']);
    await postWebhook(p.id, 'issue_comment', payload('issue_comment', 'created', repo, 2));
    github.state.updateIssue(repo, 2, { title: 'Greeting (shipped)' });
    await postWebhook(p.id, 'issues', payload('issues', 'edited', repo, 2));
    expect((await reconcile(p.id)).status).toBe(200);
    await sleep(1_000);
    expect((await runsOfTicket(repo, 2)).map((r) => r.id)).toEqual([admitted.run_id]);
    // The comment was the ticket's next observation: it recorded the run's end, and nothing more.
    const after = await ticket(p.id, 2);
    expect(after, JSON.stringify(after)).toMatchObject({ status: 'done', run_id: null });
    expect(after.history.map((h) => h.kind).sort()).toEqual(['admitted', 'run_ended']);
  }, 240_000);

  it('A newly blocked queued issue never starts.', async () => {
    const repo = 'acme/blocked';
    const p = await project(repo, ['scenario-three']);
    github.state.addIssue(repo, 3, { title: 'Greeting', body: BRIEF, labels: ['ready'] });
    github.state.addIssue(repo, 4, { title: 'Schema first', body: 'the schema change' });
    github.state.label(repo, 3, 'ready', PERSON);
    await postWebhook(p.id, 'issues', payload('issues', 'labeled', repo, 3));
    const admitted = await waitForTicket(p.id, 3, (t) => t.run_id);
    expect((await docket.api('GET', `/v1/runs/${admitted.run_id}`, { token: org.admin })).body.state).toBe('queued');

    // While it waits, a person makes it depend on an open issue; reconciliation learns it.
    github.state.setBlockedBy(repo, 3, [[repo, 4]]);
    expect((await reconcile(p.id)).status).toBe(200);
    const lapsed = await waitForTicket(p.id, 3, (t) => t.status === 'lapsed');
    expect(lapsed.reasons.join(' ')).toContain(`${repo}#4, which is still open`);

    // A runner that can serve it comes up and works for a while: the run never starts.
    const { home } = listeningRunner(['scenario-three']);
    await sleep(4_000);
    const run = (await docket.api('GET', `/v1/runs/${admitted.run_id}`, { token: org.admin })).body;
    expect(run.state).toBe('cancelled');
    expect(run.attempt).toBe(0);
    expect(run.stop_request.reason).toContain(`${repo}#4, which is still open`);
    expect(home.jobs().filter((j) => j.run_id === admitted.run_id)).toHaveLength(0);
  }, 240_000);
});
