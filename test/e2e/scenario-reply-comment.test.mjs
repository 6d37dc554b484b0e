// Acceptance scenario (../shared/spec/run-lifecycle.md, "Acceptance scenarios"): "A reply comment
// without human readiness change leaves the run blocked". Nothing stood in for but GitHub: a local
// Docket, the real runner CLI running a real agent script that reports a blocker, the real GitHub
// provider against the fake GitHub on loopback, and a local bare repository as the issue's remote.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeAppKeyPair, startFakeGitHub } from '../fake-github/server.mjs';
import { deliverWebhook, eventually, examplePayload, readTicket } from './autopilot-helpers.mjs';
import { agentScript, bareRepo, createOrg, RunnerHome, removeTempDirs, sleep, startDocket, tempDir, waitForRun } from './helpers.mjs';

const REPO = 'acme/gadgets';
const ISSUE = 31;
const WEBHOOK_SECRET = 'a-webhook-secret-for-the-blocker-scenario';
const BRIEF = '## Agent Brief\n\ngoal: Cache the pricing table.\nacceptance:\n- prices load from the cache\n';
const SUMMARY = 'The pricing cache needs a store and the repository names two.';

/** @type {Awaited<ReturnType<typeof startDocket>>} */
let docket;
/** @type {Awaited<ReturnType<typeof startFakeGitHub>>} */
let github;
/** @type {Awaited<ReturnType<typeof createOrg>>} */
let org;
/** @type {string} */
let projectId;
const home = new RunnerHome();

const payload = (event, action) => examplePayload(event, action, { repository: REPO, number: ISSUE });

async function postWebhook(event, body) {
  expect((await deliverWebhook(docket, projectId, event, body, { secret: WEBHOOK_SECRET })).status).toBe(202);
}

const ticket = () => readTicket(docket, org.admin, projectId, ISSUE);
/** The issue was read after `sinceMs`: the Worker handled a webhook about it. */
const issueReadSince = (sinceMs) => github.requests.some((r) => r.method === 'GET' && r.path === `/repos/${REPO}/issues/${ISSUE}` && r.atMs >= sinceMs && r.status === 200);

beforeAll(async () => {
  const keys = makeAppKeyPair();
  github = await startFakeGitHub({ appId: '1001', installationId: '2002', publicKey: keys.publicKey });
  docket = await startDocket({ TRACKER_DELIVERY_BACKOFF_BASE_MS: '1000' });
  org = await createOrg(docket, 'blocker-scenario');
  // The agent asks a person on its first attempt and finishes on the next one.
  const agent = agentScript(tempDir('agent'), `
    import { writeFileSync } from 'node:fs';
    console.log('::phase implementing');
    if (process.env.DOCKET_ATTEMPT === '1') {
      writeFileSync(process.env.DOCKET_RESULT_FILE, JSON.stringify({ outcome: 'blocked', blocker: {
        summary: ${JSON.stringify(SUMMARY)},
        evidence: ['config/cache.yml names redis', 'config/test.yml names memcached'],
        questions: ['Redis or Memcached?'],
        human_action: 'Answer in a comment, then remove and add the ready label.',
      } }));
    } else {
      writeFileSync('CACHE.md', 'redis\\n');
    }
  `);
  const created = await docket.api('POST', '/v1/autopilot/projects', {
    token: org.admin,
    body: {
      name: 'gadgets',
      repository: REPO,
      run: { launch: { command: [process.execPath, agent] }, labels: [] },
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

describe('blocked runs and reply comments', () => {
  it('A reply comment without human readiness change leaves the run blocked', async () => {
    // The issue's remote is a local bare repository: git rewrites the GitHub URL the run names.
    const remote = bareRepo();
    const gitEnv = { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: `url.${remote.url}.insteadOf`, GIT_CONFIG_VALUE_0: `https://github.com/${REPO}` };
    // GitHub reads the run's branch from the same bare repository the runner pushes to.
    github.publication.useBareRepository(REPO, remote.url);
    github.state.addIssue(REPO, ISSUE, { title: 'Cache the pricing table', body: BRIEF, labels: ['ready'] });
    github.state.label(REPO, ISSUE, 'ready', { login: 'alice', type: 'User' });
    await postWebhook('issues', payload('issues', 'labeled'));
    const admitted = await eventually('the admission', async () => (await ticket())?.run_id);
    const runId = admitted;

    // The runner runs the agent, which reports a blocker: the run waits for a person.
    const listener = home.listen([], gitEnv);
    const blocked = await waitForRun(docket, org.admin, runId, (r) => r.state === 'blocked', 90_000);
    expect(blocked.blocker).toMatchObject({ summary: SUMMARY, questions: ['Redis or Memcached?'], attempt: 1 });
    expect(blocked.steps.map((s) => s.outcome)).toEqual(['blocked']);

    // The blocker comment appears on the issue, once, with its receipt on the run.
    const comment = await eventually('the blocker comment', async () => github.state.comments(REPO, ISSUE).find((c) => c.body.includes(SUMMARY)));
    expect(comment.login).toBe('docket[bot]');
    expect(comment.body).toContain('Redis or Memcached?');
    expect(comment.body).toContain(`<!-- docket:run=${runId}:kind=blocker_comment -->`);
    const delivery = await eventually('the delivery receipt', async () => {
      const res = await docket.api('GET', `/v1/runs/${runId}/deliveries`, { token: org.admin });
      return res.body.deliveries.find((d) => d.kind === 'blocker_comment' && d.status === 'delivered');
    });
    expect(delivery.receipt).toEqual({ comment_id: String(comment.id), url: comment.html_url });

    // A person answers in a comment: a signed issue_comment webhook changes nothing.
    github.state.addComment(REPO, ISSUE, 'Use Redis, please.', 'alice');
    const repliedAt = Date.now();
    await postWebhook('issue_comment', payload('issue_comment', 'created'));
    await eventually('the reply webhook to be handled', async () => issueReadSince(repliedAt));
    await sleep(2_000);
    const after = (await docket.api('GET', `/v1/runs/${runId}`, { token: org.admin })).body;
    expect(after.state).toBe('blocked');
    expect(after.version).toBe(blocked.version);
    expect((await ticket()).history.map((h) => h.kind)).not.toContain('authorized');
    expect(github.state.comments(REPO, ISSUE).filter((c) => c.login === 'docket[bot]')).toHaveLength(1);

    // A person removes and adds the ready label: a new readiness generation requeues the same run.
    github.state.unlabel(REPO, ISSUE, 'ready', { login: 'alice', type: 'User' });
    await sleep(1_100); // GitHub records whole seconds: the new transition is a later one
    github.state.label(REPO, ISSUE, 'ready', { login: 'alice', type: 'User' });
    await postWebhook('issues', payload('issues', 'labeled'));
    const done = await waitForRun(docket, org.admin, runId, (r) => r.state === 'completed', 90_000);
    expect(done.id).toBe(runId);
    // The second attempt's work was pushed and published: the run completed with its pull request.
    expect(done.steps.map((s) => s.outcome)).toEqual(['blocked', 'pushed']);
    expect(done.publication.pr).toMatchObject({ number: expect.any(Number) });
    expect(done.artifact.patch).toContain('CACHE.md');
    expect((await ticket()).history.map((h) => h.kind)).toContain('authorized');
    const runs = (await docket.api('GET', '/v1/runs?limit=200', { token: org.admin })).body.runs;
    expect(runs.map((r) => r.id)).toEqual([runId]);
    await listener.kill('SIGTERM');
  }, 300_000);
});
