// Autopilot as a new user meets it, with nothing stood in for but GitHub: a local Docket with the
// real project store, encrypted secrets, admission doors, ticket objects and rules, and the real
// GitHub provider talking to a fake GitHub on loopback (test/fake-github/server.mjs). A project is
// configured through the API, real webhook payloads from @octokit/webhooks-examples are signed and
// posted, and the run appears (../shared/spec/run-lifecycle.md, "Admission", "Human readiness
// authorization").

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeAppKeyPair, startFakeGitHub } from '../fake-github/server.mjs';
import { deliverWebhook, examplePayload, readTicket, waitForTicket as waitForTicketOf } from './autopilot-helpers.mjs';
import { createOrg, removeTempDirs, sleep, startDocket } from './helpers.mjs';

const REPO = 'acme/widgets';
const WEBHOOK_SECRET = 'a-webhook-secret-for-the-e2e-project';
const BRIEF = '## Agent Brief\n\ngoal: Add a dark mode toggle to the settings page.\nacceptance:\n- the toggle persists across reloads\n';

const labeledPayload = (number, sender) => examplePayload('issues', 'labeled', { repository: REPO, number, sender });

/** @type {Awaited<ReturnType<typeof startDocket>>} */
let docket;
/** @type {Awaited<ReturnType<typeof startFakeGitHub>>} */
let github;
/** @type {{ admin: string }} */
let org;
/** @type {string} */
let projectId;

const postWebhook = (payload, { deliveryId, event = 'issues', secret = WEBHOOK_SECRET } = {}) => deliverWebhook(docket, projectId, event, payload, { secret, deliveryId });
const ticket = (number) => readTicket(docket, org.admin, projectId, number);
const waitForTicket = (number, pred) => waitForTicketOf(docket, org.admin, projectId, number, pred, 30_000);

async function runsOfOrg() {
  const res = await docket.api('GET', '/v1/runs?limit=200', { token: org.admin });
  expect(res.status).toBe(200);
  return res.body.runs;
}

beforeAll(async () => {
  const keys = makeAppKeyPair();
  github = await startFakeGitHub({ appId: '1001', installationId: '2002', publicKey: keys.publicKey });
  docket = await startDocket();
  org = await createOrg(docket, 'autopilot-e2e');
  const created = await docket.api('POST', '/v1/autopilot/projects', {
    token: org.admin,
    body: {
      name: 'widgets',
      repository: REPO,
      run: { launch: { command: ['agent', 'run'] }, labels: [] },
      webhook_secret: WEBHOOK_SECRET,
      github: { api_url: github.url, app_id: '1001', installation_id: '2002', private_key: keys.privateKey },
    },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  projectId = created.body.id;
  expect(JSON.stringify(created.body)).not.toContain(WEBHOOK_SECRET);
}, 120_000);

afterAll(async () => {
  await docket?.stop();
  await github?.close();
  removeTempDirs();
});

describe('autopilot against a fake GitHub, through the HTTP surface', () => {
  it("a person's ready label admits one run, and the same delivery again admits nothing more", async () => {
    github.state.addIssue(REPO, 7, { title: 'Dark mode', body: BRIEF, labels: ['ready'] });
    github.state.label(REPO, 7, 'ready', { login: 'alice', type: 'User' });
    const deliveryId = randomUUID();
    const first = await postWebhook(labeledPayload(7, { login: 'alice', type: 'User' }), { deliveryId });
    expect(first.status, JSON.stringify(first.body)).toBe(202);
    const admitted = await waitForTicket(7, (t) => t.run_id);
    const run = await docket.api('GET', `/v1/runs/${admitted.run_id}`, { token: org.admin });
    expect(run.status).toBe(200);
    expect(run.body.state).toBe('queued');
    expect(run.body.brief).toContain('dark mode toggle');

    const again = await postWebhook(labeledPayload(7, { login: 'alice', type: 'User' }), { deliveryId });
    expect(again.status).toBe(202);
    await sleep(1_000);
    const runs = (await runsOfOrg()).filter((r) => r.id === admitted.run_id || r.metadata?.autopilot_ticket === admitted.key);
    expect(runs.map((r) => r.id)).toEqual([admitted.run_id]);
    expect((await ticket(7)).run_id).toBe(admitted.run_id);
  }, 60_000);

  it("a bot's ready label admits none, and the ticket says why", async () => {
    github.state.addIssue(REPO, 8, { title: 'Bump deps', body: BRIEF, labels: ['ready'] });
    github.state.label(REPO, 8, 'ready', { login: 'renovate[bot]', type: 'Bot' });
    const before = (await runsOfOrg()).length;
    const res = await postWebhook(labeledPayload(8, { login: 'renovate[bot]', type: 'Bot' }));
    expect(res.status).toBe(202);
    const refused = await waitForTicket(8, (t) => JSON.stringify(t).toLowerCase().includes('bot'));
    expect(refused.run_id ?? null).toBeNull();
    expect((await runsOfOrg()).length).toBe(before);
  }, 60_000);

  it('a wrong, missing or malformed signature is 401 and changes nothing', async () => {
    const payload = labeledPayload(9, { login: 'alice', type: 'User' });
    expect((await postWebhook(payload, { secret: 'not-the-secret' })).status).toBe(401);
    const body = JSON.stringify(payload);
    for (const signature of [undefined, 'sha256=nothex', 'garbage']) {
      const headers = { 'content-type': 'application/json', 'x-github-event': 'issues', 'x-github-delivery': randomUUID() };
      if (signature) headers['x-hub-signature-256'] = signature;
      const res = await fetch(`${docket.url}/v1/autopilot/projects/${projectId}/webhook`, { method: 'POST', headers, body });
      expect(res.status, signature ?? 'missing').toBe(401);
    }
    expect(await ticket(9)).toBeNull();
  }, 60_000);

  it('an operator reconcile finds a ready issue whose webhook never came, through the real GitHub client', async () => {
    github.state.addIssue(REPO, 10, { title: 'Lost webhook', body: BRIEF, labels: ['ready'] });
    github.state.label(REPO, 10, 'ready', { login: 'bob', type: 'User' });
    const res = await docket.api('POST', `/v1/autopilot/projects/${projectId}/reconcile`, { token: org.admin, body: {} });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const admitted = await waitForTicket(10, (t) => t.run_id);
    expect(admitted.run_id).toMatch(/^run_/);
    expect(github.requests.some((r) => r.path.startsWith('/app/installations/2002/access_tokens'))).toBe(true);
  }, 60_000);
});
