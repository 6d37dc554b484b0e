// Linear as the tracker, end to end (../shared/spec/run-lifecycle.md, "Admission", "Human readiness
// authorization", "Completion and recovery"): a local Docket, the Linear stand-in on loopback
// (test/fake-linear/: Linear's GraphQL API executed against its schema, webhooks signed as Linear
// signs them, delivered to the project's Linear door), the GitHub fake as the code host with a local
// bare repository as its remote, and the real runner CLI running a real agent script. One Worker
// for the file; each scenario uses its own issues.

import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { eventually, readTicket, turnCountingAgent, waitForDeliveries as waitForDeliveriesOf, waitForTicket as waitForTicketOf } from './autopilot-helpers.mjs';
import { agentScript, waitForRun, sleep, tempDir } from './helpers.mjs';
import { REPO, startLinearPlane } from './linear-plane.mjs';

const SUMMARY = 'The pricing cache needs a store and the repository names two.';
/** Reports a blocker the first time it runs for a run (a marker file beside it says it did), then does the work. */
const BLOCKING_AGENT = `
  import { appendFileSync, existsSync, writeFileSync } from 'node:fs';
  const marker = new URL('./asked-' + process.env.DOCKET_RUN_ID, import.meta.url);
  if (!existsSync(marker)) {
    writeFileSync(marker, '');
    writeFileSync(process.env.DOCKET_RESULT_FILE, JSON.stringify({ outcome: 'blocked', blocker: {
      summary: ${JSON.stringify(SUMMARY)}, evidence: ['config/cache.yml names redis'], questions: ['Redis or Memcached?'],
      human_action: 'Answer in a comment, then remove and add the ready label.',
    } }));
  } else {
    appendFileSync('CACHE.md', 'redis\\n');
  }
`;
// A tracker delivery is tried twice here, the second try 1 s after the first (the 200 ms backoff in
// the queue's whole seconds), then waits failed for an operator's retry.
const VARS = { PUBLICATION_RETRY_MS: '1000', TRACKER_DELIVERY_MAX_ATTEMPTS: '2', TRACKER_DELIVERY_BACKOFF_BASE_MS: '200', GITHUB_RETRIES: '1', GITHUB_RETRY_BASE_MS: '100', LINEAR_RETRIES: '1', LINEAR_RETRY_BASE_MS: '100' };

let docket;
let github;
let linear;
let org;
let projectId;
/** A second project (team OPS) whose runs need a runner label no runner here has: they stay queued. */
let queuedProjectId;
/** A third (team BLK) whose agent reports a blocker on its first attempt and finishes on the next. */
let blockingProjectId;
let home;
/** The Docket, the Linear stand-in and the GitHub fake of this file (test/e2e/linear-plane.mjs). */
let plane;

const alice = () => linear.state.person('Alice Human');
const numberOf = (issue) => issue.number;
const ticket = (issue) => readTicket(docket, org.admin, projectId, numberOf(issue));
const waitForTicket = (issue, pred, timeoutMs = 60_000) => waitForTicketOf(docket, org.admin, projectId, numberOf(issue), pred, timeoutMs);

/** A new issue of team ENG with an Agent Brief, created by a person (its create webhook delivered). */
const newIssue = (title, extra = {}) => plane.newIssue('ENG', title, extra);

/** The runs whose ticket is `issue`'s (the list shows no metadata: each run is read). */
async function runsOf(issue) {
  const key = `linear:acme/${linear.state.identifier(issue)}`;
  const listed = await docket.api('GET', '/v1/runs?limit=200', { token: org.admin });
  expect(listed.status).toBe(200);
  const runs = await Promise.all(listed.body.runs.map(async (r) => (await docket.api('GET', `/v1/runs/${r.id}`, { token: org.admin })).body));
  return runs.filter((r) => r.metadata?.autopilot_ticket === key);
}

beforeAll(async () => {
  plane = await startLinearPlane(VARS, 'linear-e2e');
  ({ docket, github, linear, org, home } = plane);
  const agent = turnCountingAgent(tempDir('scratch')).script;
  projectId = await plane.project('ENG', agent);
  queuedProjectId = await plane.project('OPS', agent, ['linear-queued']);
  blockingProjectId = await plane.project('BLK', agentScript(tempDir('blocking'), BLOCKING_AGENT));
  home.listen();
}, 180_000);

afterAll(async () => {
  await plane?.close();
});

describe('a Linear-tracked project, through signed Linear webhooks', () => {
  it('a human-labelled Linear issue becomes one run and one pull request on GitHub, and the issue moves to review with the pull request linked', async () => {
    const issue = await newIssue('Greeting');
    const { deliveries } = await linear.state.label(issue, 'ready', alice());
    expect(deliveries.map((d) => d.answer.status)).toEqual([202]);
    const admitted = await waitForTicket(issue, (t) => t.run_id);
    expect(admitted.ticket).toBe(`linear:acme/${linear.state.identifier(issue)}`);
    expect(admitted.history.find((h) => h.kind === 'admitted')).toMatchObject({ basis: 'human' });
    const pull = await eventually('the pull request', () => github.publication.pulls(REPO).find((p) => p.body?.includes(linear.state.identifier(issue)) || p.title?.includes('Greeting')), 150_000);
    // The run's tracker deliveries move the issue to review and link the pull request.
    await waitForDeliveriesOf(docket, org.admin, admitted.run_id, (ds) => ds.length > 0 && ds.every((d) => d.status === 'delivered'), 60_000);
    expect(linear.state.stateOf(issue).name).toBe('In Review');
    // The pull request is linked as an attachment of the issue, not in a comment.
    expect(linear.state.attachmentsOf(issue).map((a) => a.url)).toEqual([expect.stringContaining(`/pull/${pull.number}`)]);
    expect(JSON.stringify(linear.state.commentsOf(issue))).not.toContain(`/pull/${pull.number}`);
    expect(github.publication.pulls(REPO).filter((p) => p.head === pull.head)).toHaveLength(1);
    expect(await runsOf(issue)).toHaveLength(1);
  }, 240_000);

  it("an app's ready label is refused, and the ticket says why", async () => {
    const issue = await newIssue('Bump dependencies');
    await linear.state.label(issue, 'ready', linear.state.app('Dependency Bot'));
    // The issue's create delivery came first (not ready); the label's is refused for its actor.
    const refused = await waitForTicket(issue, (t) => /Dependency Bot/.test(JSON.stringify(t.reasons)));
    expect(refused.run_id ?? null).toBeNull();
    expect(await runsOf(issue)).toEqual([]);
  }, 60_000);

  it('a delivery with a stale webhookTimestamp is refused with 401 and admits nothing', async () => {
    // Its create delivery is lost, so the stale one is all Docket is sent about it.
    linear.state.loseNextWebhook();
    const issue = await newIssue('Stale delivery');
    linear.state.staleNextWebhook(5 * 60_000);
    const { deliveries } = await linear.state.label(issue, 'ready', alice());
    expect(deliveries.map((d) => d.answer.status)).toEqual([401]);
    await sleep(1_000);
    // A person's label: had the stale delivery been taken, the issue would have its run now.
    expect((await ticket(issue))?.run_id ?? null).toBeNull();
    expect(await runsOf(issue)).toEqual([]);
  }, 60_000);

  it('a duplicate delivery is admitted once', async () => {
    const issue = await newIssue('Delivered twice');
    const { deliveries } = await linear.state.label(issue, 'ready', alice());
    const admitted = await waitForTicket(issue, (t) => t.run_id);
    const again = await linear.state.redeliver(deliveries[0]);
    expect(again.status).toBe(202);
    await sleep(1_500);
    expect((await runsOf(issue)).map((r) => r.id)).toEqual([admitted.run_id]);
  }, 60_000);

  it('a blocked issue waits, and is admitted when its blocker completes', async () => {
    const blocker = await newIssue('Theme tokens');
    const blocked = await newIssue('Dark mode');
    await linear.state.block(blocker, blocked, alice());
    await linear.state.label(blocked, 'ready', alice());
    const waiting = await waitForTicket(blocked, (t) => t.reasons?.some((r) => r.includes(linear.state.identifier(blocker))));
    expect(waiting.run_id ?? null).toBeNull();
    await linear.state.complete(blocker, alice());
    // The blocker's completion names the blocker, not the blocked issue: reconciliation finds it ready now.
    const res = await docket.api('POST', `/v1/autopilot/projects/${projectId}/reconcile`, { token: org.admin, body: {} });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const admitted = await waitForTicket(blocked, (t) => t.run_id);
    expect(admitted.run_id).toMatch(/^run_/);
  }, 90_000);

  it('a lost webhook is found by reconciliation', async () => {
    // Both the issue's create delivery and its label's are lost: Docket hears nothing of it.
    linear.state.loseNextWebhook(2);
    const issue = await newIssue('Lost webhook');
    const { deliveries } = await linear.state.label(issue, 'ready', alice());
    expect(deliveries.every((d) => d.lost)).toBe(true);
    await sleep(500);
    expect((await ticket(issue))?.run_id ?? null).toBeNull();
    const res = await docket.api('POST', `/v1/autopilot/projects/${projectId}/reconcile`, { token: org.admin, body: {} });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const admitted = await waitForTicket(issue, (t) => t.run_id);
    expect(admitted.run_id).toMatch(/^run_/);
    expect(linear.requests.every((r) => r.authorization === linear.apiKey)).toBe(true);
  }, 60_000);
});

describe('run-lifecycle acceptance scenarios with Linear as the tracker', () => {
  const opsTicket = (issue, pred) => waitForTicketOf(docket, org.admin, queuedProjectId, numberOf(issue), pred, 60_000);
  const reconcileOps = () => docket.api('POST', `/v1/autopilot/projects/${queuedProjectId}/reconcile`, { token: org.admin, body: {} });
  const opsIssue = (title) => plane.newIssue('OPS', title);

  it('Duplicate webhook plus concurrent reconciliation admits one run.', async () => {
    const issue = await opsIssue('Duplicated');
    linear.state.loseNextWebhook();
    const { deliveries } = await linear.state.label(issue, 'ready', alice());
    // Linear retries the delivery while the cron's reconciliation and an operator's run at once.
    await Promise.all([linear.state.redeliver(deliveries[0]), linear.state.redeliver(deliveries[0]), reconcileOps(), reconcileOps()]);
    const admitted = await opsTicket(issue, (t) => t.run_id);
    await reconcileOps();
    expect((await runsOf(issue)).map((r) => r.id)).toEqual([admitted.run_id]);
  }, 60_000);

  it('An unrelated comment on a completed issue does not create another run.', async () => {
    const issue = await opsIssue('Completed');
    await linear.state.label(issue, 'ready', alice());
    const admitted = await opsTicket(issue, (t) => t.run_id);
    await linear.state.complete(issue, alice());
    await linear.state.comment(issue, 'Thanks, all good.', linear.state.person('Bob Human'));
    expect((await reconcileOps()).status).toBe(200);
    await sleep(1_000);
    expect((await runsOf(issue)).map((r) => r.id)).toEqual([admitted.run_id]);
  }, 60_000);

  it('A newly blocked queued issue never starts.', async () => {
    const issue = await opsIssue('Greeting');
    await linear.state.label(issue, 'ready', alice());
    const admitted = await opsTicket(issue, (t) => t.run_id);
    expect((await docket.api('GET', `/v1/runs/${admitted.run_id}`, { token: org.admin })).body.state).toBe('queued');
    // While it waits, a person makes it depend on an open issue: the relation's webhook names it.
    const blocker = await opsIssue('Schema first');
    await linear.state.block(blocker, issue, alice());
    const lapsed = await opsTicket(issue, (t) => t.status === 'lapsed');
    expect(lapsed.reasons.join(' ')).toContain(linear.state.identifier(blocker));
    const run = (await docket.api('GET', `/v1/runs/${admitted.run_id}`, { token: org.admin })).body;
    expect(run.state).toBe('cancelled');
    expect(run.attempt).toBe(0);
  }, 60_000);
});

describe('run-lifecycle acceptance scenarios of publication with Linear as the tracker', () => {
  it('Final tracker delivery fails: PR remains completed, delivery remains retryable, coding is not repeated', async () => {
    const issue = await newIssue('Greeting, Linear down');
    // Every write to Linear fails from now on (moving the issue, linking the pull request); reads answer.
    linear.state.failWrites(1_000);
    onTestFinished(() => linear.state.clearFaults());
    await linear.state.label(issue, 'ready', alice());
    const { run_id: runId } = await waitForTicket(issue, (t) => t.run_id);
    const done = await waitForRun(docket, org.admin, runId, (r) => r.state === 'completed' || r.state === 'failed', 150_000);
    expect(done.state, JSON.stringify(done)).toBe('completed');
    const failed = await waitForDeliveriesOf(docket, org.admin, runId, (ds) => ds.length > 0 && ds.every((d) => d.status === 'failed'), 120_000);
    // Each delivery was retried once after Linear's 500, and failed at its second try.
    for (const d of failed) expect(d, JSON.stringify(d)).toMatchObject({ tries: 2, max_tries: 2, last_error: expect.stringContaining('Internal server error') });
    expect(linear.state.stateOf(issue).name).not.toBe('In Review');

    linear.state.clearFaults(); // Linear is back
    for (const { kind } of failed) {
      const retry = await docket.api('POST', `/v1/runs/${runId}/deliveries/${kind}/retry`, { token: org.admin, body: {} });
      expect(retry.status, JSON.stringify(retry.body)).toBe(202);
    }
    await waitForDeliveriesOf(docket, org.admin, runId, (ds) => ds.every((d) => d.status === 'delivered'), 60_000);
    expect(linear.state.stateOf(issue).name).toBe('In Review');
    // The run never changed: one attempt, its one pull request.
    expect((await docket.api('GET', `/v1/runs/${runId}`, { token: org.admin })).body).toMatchObject({ state: 'completed', attempt: 1, publication: { pr: done.publication.pr } });
    expect(github.publication.pulls(REPO).filter((p) => p.head === `docket/${runId}`)).toHaveLength(1);
  }, 240_000);
});

describe('run-lifecycle acceptance scenarios of a blocked run with Linear as the tracker', () => {
  it('A reply comment without human readiness change leaves the run blocked', async () => {
    const issue = await plane.newIssue('BLK', 'Cache the pricing table');
    await linear.state.label(issue, 'ready', alice());
    const { run_id: runId } = await waitForTicketOf(docket, org.admin, blockingProjectId, issue.number, (t) => t.run_id, 60_000);
    const blocked = await waitForRun(docket, org.admin, runId, (r) => r.state === 'blocked', 120_000);
    expect(blocked.blocker).toMatchObject({ summary: SUMMARY });
    // The blocker is posted on the Linear issue, once, by Docket's key.
    const docketComments = () => linear.state.commentsOf(issue).filter((c) => c.userId === linear.viewer.id);
    await eventually('the blocker comment in Linear', () => docketComments().some((c) => c.body.includes(SUMMARY)));

    // A person answers in a comment: its signed Comment delivery is read, and changes nothing.
    const repliedAt = Date.now();
    await linear.state.comment(issue, 'Use Redis, please.', alice());
    await eventually('the reply to be read', () => linear.requests.some((r) => r.operation === 'DocketIssue' && r.variables?.id && r.status === 200 && r.atMs >= repliedAt));
    await sleep(2_000);
    const after = (await docket.api('GET', `/v1/runs/${runId}`, { token: org.admin })).body;
    expect(after).toMatchObject({ state: 'blocked', version: blocked.version });
    expect(docketComments()).toHaveLength(1);

    // A person removes and adds the ready label: a new readiness generation requeues the same run.
    await linear.state.unlabel(issue, 'ready', alice());
    await linear.state.label(issue, 'ready', alice());
    const done = await waitForRun(docket, org.admin, runId, (r) => r.state === 'completed', 120_000);
    expect(done.steps.map((s) => s.outcome).filter((o) => o !== 'requeued')).toEqual(['blocked', 'pushed']);
    const runs = (await docket.api('GET', '/v1/runs?limit=200', { token: org.admin })).body.runs;
    expect(runs.filter((r) => r.id === runId)).toHaveLength(1);
    expect((await readTicket(docket, org.admin, blockingProjectId, issue.number)).history.map((h) => h.kind)).toContain('authorized');
  }, 300_000);
});
