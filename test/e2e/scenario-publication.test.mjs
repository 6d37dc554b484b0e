// Publication end to end (../shared/spec/run-lifecycle.md, "Completion and recovery" and its
// acceptance scenarios): a local Docket, the real runner CLI running a real agent script, the fake
// GitHub on loopback (test/fake-github/server.mjs) and a local bare repository as the remote. An issue
// is admitted through the webhook, the agent edits the checkout, the runner pushes the run's branch
// with its push credential, and Docket finds or creates the pull request.

import { spawnSync } from 'node:child_process';
import { createHmac, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeAppKeyPair, startFakeGitHub } from '../fake-github/server.mjs';
import { bareRemote, pauseAcrossRestart, turnCountingAgent, waitForDeliveries as waitForDeliveriesOf } from './autopilot-helpers.mjs';
import { allEvents, createOrg, RunnerHome, removeTempDirs, startDocket, tempDir, waitForRun } from './helpers.mjs';

const REPO = 'acme/widgets';
const WEBHOOK_SECRET = 'a-webhook-secret-for-the-publication-e2e';
const BRIEF = '## Agent Brief\n\ngoal: Fix the greeting in the README.\nacceptance:\n- the README greets the world\n';
// Quick retries of the PR step, many of them: a test's outage outlasts several.
// Tracker deliveries give up quickly here, so an operator's retry can be shown.
const VARS = { PUBLICATION_RETRY_MS: '1000', PUBLICATION_TRIES_MAX: '30', TRACKER_DELIVERY_MAX_ATTEMPTS: '2', TRACKER_DELIVERY_BACKOFF_BASE_MS: '200', GITHUB_RETRIES: '1', GITHUB_RETRY_BASE_MS: '100' };

let docket;
let github;
let org;
let projectId;
let home;
let listener;
let remote;
let agent;
/** How many coding turns the agent has made for a run. */
let codingTurns;
let nextIssue = 40;

const head = (branch) => spawnSync('git', ['--git-dir', remote.bare, 'rev-parse', '--verify', '--quiet', `refs/heads/${branch}`], { encoding: 'utf8' }).stdout.trim();

async function admit() {
  const number = nextIssue++;
  github.state.addIssue(REPO, number, { title: `Greeting ${number}`, body: BRIEF, labels: ['ready'] });
  github.state.label(REPO, number, 'ready', { login: 'alice', type: 'User' });
  const payload = { action: 'labeled', label: { name: 'ready' }, issue: { number }, repository: { full_name: REPO }, sender: { login: 'alice', type: 'User' } };
  const body = JSON.stringify(payload);
  const deliveryId = randomUUID();
  // Delivered as GitHub does, again (same delivery id) when the connection failed.
  for (let attempt = 1; ; attempt++) {
    try {
      const res = await fetch(`${docket.url}/v1/autopilot/projects/${projectId}/webhook`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-github-event': 'issues', 'x-github-delivery': deliveryId, 'x-hub-signature-256': `sha256=${createHmac('sha256', WEBHOOK_SECRET).update(body).digest('hex')}` },
        body,
      });
      expect(res.status).toBe(202);
      break;
    } catch (e) {
      if (attempt >= 5) throw e;
      await new Promise((r) => setTimeout(r, 1_000));
    }
  }
  for (let i = 0; i < 300; i++) {
    const t = await docket.api('GET', `/v1/autopilot/projects/${projectId}/tickets/${number}`, { token: org.admin });
    if (t.status === 200 && t.body.run_id) return { number, runId: t.body.run_id };
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`issue ${number} was never admitted`);
}

const waitForDeliveries = (runId, pred) => waitForDeliveriesOf(docket, org.admin, runId, pred, 150_000);

beforeAll(async () => {
  const keys = makeAppKeyPair();
  const base = tempDir('remotes');
  remote = bareRemote(base, REPO);
  github = await startFakeGitHub({ appId: '1001', installationId: '2002', publicKey: keys.publicKey, htmlUrlBase: base });
  github.publication.useBareRepository(REPO, remote.bare);
  docket = await startDocket(VARS);
  org = await createOrg(docket, 'publication-e2e');
  ({ script: agent, codingTurns } = turnCountingAgent(tempDir('scratch')));
  const created = await docket.api('POST', '/v1/autopilot/projects', {
    token: org.admin,
    body: {
      name: 'widgets',
      repository: REPO,
      ready_label: 'ready',
      run: { launch: { command: [process.execPath, agent] }, labels: [] },
      webhook_secret: WEBHOOK_SECRET,
      github: { api_url: github.url, app_id: '1001', installation_id: '2002', private_key: keys.privateKey },
    },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  projectId = created.body.id;
  home = new RunnerHome();
  const reg = home.run(['register', '--server', docket.url, '--token', org.registration]);
  expect(reg.code, reg.stderr).toBe(0);
  listener = home.listen();
}, 180_000);

afterAll(async () => {
  await home?.cleanup();
  await docket?.stop();
  await github?.close();
  removeTempDirs();
});

describe('publication against a fake GitHub and a local bare repository', () => {
  it('Crash after PR creation but before receipt persistence: recovery locates that PR and does not create another', async () => {
    github.publication.crashAfterPullCreation(1);
    const { runId } = await admit();
    const done = await waitForRun(docket, org.admin, runId, (r) => r.state === 'completed' || r.state === 'failed', 120_000);
    expect(done.state, JSON.stringify(done)).toBe('completed');
    const branch = `docket/${runId}`;
    // The runner pushed the agent's work to the run's branch of the remote, and Docket stored the one PR of that branch.
    expect(done.publication.head_sha).toBe(head(branch));
    expect(spawnSync('git', ['--git-dir', remote.bare, 'show', `${head(branch)}:README.md`], { encoding: 'utf8' }).stdout).toContain('hello, world');
    // The creation GitHub carried out but never answered happened; every later try found that PR.
    const creations = github.requests.filter((r) => r.method === 'POST' && r.path === `/repos/${REPO}/pulls` && r.body?.head === branch);
    expect(creations[0].status).toBeNull();
    expect(creations.slice(1).every((r) => r.status === 422)).toBe(true);
    const pulls = github.publication.pulls(REPO).filter((p) => p.head === branch);
    expect(pulls).toHaveLength(1);
    expect(done.publication.pr).toMatchObject({ number: pulls[0].number, url: `https://github.com/${REPO}/pull/${pulls[0].number}` });
    // Every lookup named owner:branch, never a bare branch name.
    const lookups = github.requests.filter((r) => r.method === 'GET' && r.path === `/repos/${REPO}/pulls`);
    expect(lookups.length).toBeGreaterThan(0);
    for (const l of lookups) expect(l.query.head).toMatch(/^acme:docket\//);
    // The push credential was narrowed to this repository and contents: write.
    expect(github.publication.pushTokenRequests()).toContainEqual({ repositories: ['widgets'], permissions: { contents: 'write' }, status: 201 });
    expect(codingTurns(runId)).toBe(1);
  }, 180_000);

  it('Pause after Git push and before PR creation: resume reconciles publication without another coding turn', async () => {
    // GitHub's pull request endpoints are down after the push: the run waits in publishing, pushed.
    github.state.fail({ path: `/repos/${REPO}/pulls`, status: 503, message: 'Service Unavailable', times: 1_000 });
    const { runId } = await admit();
    const branch = `docket/${runId}`;
    const pushed = await waitForRun(docket, org.admin, runId, (r) => r.publication?.head_sha && r.publication.tries > 0, 120_000);
    expect(pushed.state).toBe('publishing');
    expect(pushed.publication.pr).toBeNull();
    expect(head(branch)).toBe(pushed.publication.head_sha);
    // An operator stops it at this boundary, the deployment restarts while it is paused, GitHub comes back.
    await pauseAcrossRestart(docket, org.admin, runId, VARS, () => github.publication.clearFaults());
    const done = await waitForRun(docket, org.admin, runId, (r) => r.state === 'completed' || r.state === 'failed', 120_000);
    expect(done.state, JSON.stringify(done)).toBe('completed');
    expect(codingTurns(runId)).toBe(1);
    expect(github.publication.pulls(REPO).filter((p) => p.head === branch)).toHaveLength(1);
    expect(done.publication.head_sha).toBe(pushed.publication.head_sha);
    expect(head(branch)).toBe(pushed.publication.head_sha);
  }, 240_000);

  it('Final tracker delivery fails: PR remains completed, delivery remains retryable, coding is not repeated', async () => {
    // Comments and labels on the issue fail at GitHub; the publication does not depend on them.
    github.state.fail({ path: /\/issues\/\d+\/(comments|labels)/, status: 502, message: 'Bad Gateway', times: 1_000 });
    const { runId, number } = await admit();
    const done = await waitForRun(docket, org.admin, runId, (r) => r.state === 'completed' || r.state === 'failed', 120_000);
    expect(done.state).toBe('completed');
    const events = await allEvents(docket, org.admin, runId);
    const deliveries = events.filter((e) => e.type === 'run.tracker_delivery').map((e) => e.data);
    expect(deliveries.map((d) => d.kind).sort()).toEqual(['pr_comment', 'review_label']);
    for (const d of deliveries) expect(d).toMatchObject({ ticket_key: `github:${REPO}#${number}`, project_id: projectId, pr_url: done.publication.pr.url, pr_number: done.publication.pr.number });
    // Later the run is still completed with its PR, and the agent ran once.
    await new Promise((r) => setTimeout(r, 3_000));
    const later = (await docket.api('GET', `/v1/runs/${runId}`, { token: org.admin })).body;
    expect(later).toMatchObject({ state: 'completed', publication: { pr: done.publication.pr } });
    expect(codingTurns(runId)).toBe(1);

    // Each delivery has its own receipt: its tries ran out against GitHub's errors, and it waits for an operator.
    const failed = await waitForDeliveries(runId, (ds) => ds.length === 2 && ds.every((d) => d.status === 'failed'));
    for (const d of failed) expect(d.last_error).toContain('Bad Gateway');
    github.publication.clearFaults(); // GitHub is back
    for (const kind of ['review_label', 'pr_comment']) {
      const retry = await docket.api('POST', `/v1/runs/${runId}/deliveries/${kind}/retry`, { token: org.admin, body: {} });
      expect(retry.status, JSON.stringify(retry.body)).toBe(202);
    }
    await waitForDeliveries(runId, (ds) => ds.every((d) => d.status === 'delivered'));
    expect(github.state.comments(REPO, number).filter((c) => c.body.includes(done.publication.pr.url))).toHaveLength(1);
    expect(github.state.issue(REPO, number).labels).toContain('needs-review');
    expect(github.state.issue(REPO, number).labels).not.toContain('ready');
    // The run never changed, and the agent still ran once.
    expect((await docket.api('GET', `/v1/runs/${runId}`, { token: org.admin })).body).toMatchObject({ state: 'completed', attempt: 1, publication: { pr: done.publication.pr } });
    expect(codingTurns(runId)).toBe(1);
  }, 360_000);
});
