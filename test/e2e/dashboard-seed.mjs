// One organization with something on every page of the dashboard, made once through the API alone
// (no runner CLI): runners (one with a long name, as a real host's often is), queued and cancelled
// runs, tokens, a GitHub project (the fake GitHub on loopback) with an admitted and a refused ticket,
// and a Linear project (the Linear stand-in on loopback).
import { expect } from 'vitest';
import { makeAppKeyPair, startFakeGitHub } from '../fake-github/server.mjs';
import { startFakeLinear } from '../fake-linear/server.mjs';
import { deliverWebhook, examplePayload, waitForTicket } from './autopilot-helpers.mjs';
import { createOrg, dispatch } from './helpers.mjs';

const REPO = 'acme/widgets';
const WEBHOOK_SECRET = 'a-webhook-secret-for-the-console-project';
const BRIEF = '## Agent Brief\n\ngoal: Add a dark mode toggle to the settings page.\nacceptance:\n- the toggle persists across reloads\n';
export const LONG_RUNNER_NAME = 'build-runner-with-a-rather-long-hostname-eu-west-1-rack-7';

async function ok(answer, what) {
  const res = await answer;
  expect(res.status, `${what}: ${JSON.stringify(res.body)}`).toBeLessThan(300);
  return res.body;
}

/** A runner registered through the API: its machine id. */
async function registerRunner(docket, admin, name, labels) {
  const reg = await ok(docket.api('POST', '/v1/tokens', { token: admin, body: { kind: 'registration', name: `for ${name}` } }), 'registration token');
  const runner = await ok(docket.api('POST', '/v1/runners/register', { token: reg.token, body: { name, labels, protocols: ['process'], cli_version: '0.1.0' } }), 'register');
  return runner.machine_id;
}

/** A GitHub project with issue 7 admitted (a person's label) and issue 8 refused (a bot's). */
async function githubProject(docket, admin, github, keys) {
  const project = await ok(docket.api('POST', '/v1/autopilot/projects', {
    token: admin,
    body: {
      name: 'widgets',
      repository: REPO,
      run: { launch: { command: ['agent', 'run'] }, labels: ['gpu'] },
      webhook_secret: WEBHOOK_SECRET,
      github: { api_url: github.url, app_id: '1001', installation_id: '2002', private_key: keys.privateKey },
    },
  }), 'GitHub project');
  for (const [number, title, sender] of [[7, 'Dark mode', { login: 'alice', type: 'User' }], [8, 'Bump deps', { login: 'renovate[bot]', type: 'Bot' }]]) {
    github.state.addIssue(REPO, number, { title, body: BRIEF, labels: ['ready'] });
    github.state.label(REPO, number, 'ready', sender);
    const res = await deliverWebhook(docket, project.id, 'issues', examplePayload('issues', 'labeled', { repository: REPO, number, sender }), { secret: WEBHOOK_SECRET });
    expect(res.status).toBe(202);
  }
  const admitted = await waitForTicket(docket, admin, project.id, 7, (t) => t.run_id);
  await waitForTicket(docket, admin, project.id, 8, (t) => t.reasons?.length > 0);
  return { id: project.id, ticket: 7, runId: admitted.run_id };
}

async function linearProject(docket, admin, github, keys, linear) {
  linear.state.addLabel('ready');
  linear.state.addTeam('ENG', 'ENG');
  const project = await ok(docket.api('POST', '/v1/autopilot/projects', {
    token: admin,
    body: {
      name: 'eng from linear',
      repository: REPO,
      tracker: { kind: 'linear', api_url: linear.url, workspace: 'acme', team: 'ENG', ready_label: 'ready', review_state: 'In Review', api_key: linear.apiKey },
      run: { launch: { command: ['agent', 'run'] }, labels: ['gpu'] },
      webhook_secret: 'lin_wh_the_console_projects_signing_secret',
      github: { api_url: github.url, app_id: '1001', installation_id: '2002', private_key: keys.privateKey },
    },
  }), 'Linear project');
  return { id: project.id };
}

/**
 * The organization, its ids for the pages' paths, and `close()` for the fakes it started.
 * @param {Awaited<ReturnType<typeof import('./helpers.mjs').startDocket>>} docket
 */
export async function seedConsole(docket) {
  const org = await createOrg(docket, 'console');
  const keys = makeAppKeyPair();
  const github = await startFakeGitHub({ appId: '1001', installationId: '2002', publicKey: keys.publicKey });
  const linear = await startFakeLinear({ urlKey: 'acme' });
  const machineId = await registerRunner(docket, org.admin, 'rack-1', ['linux']);
  await registerRunner(docket, org.admin, LONG_RUNNER_NAME, ['linux', 'a-label-that-is-long-enough-to-matter-on-a-phone']);
  await ok(docket.api('POST', '/v1/tokens', { token: org.admin, body: { kind: 'member', name: 'a member of the team' } }), 'member token');
  const queued = await dispatch(docket, org.admin, { brief: 'Say hello to the world in the README, and keep the greeting short enough for a phone', labels: ['gpu'], launch: { protocol: 'process', command: ['true'] } });
  const cancelled = await dispatch(docket, org.admin, { brief: 'needs a GPU', labels: ['gpu'], launch: { protocol: 'process', command: ['true'] } });
  await ok(docket.api('POST', `/v1/runs/${cancelled.id}/cancel`, { token: org.admin, body: { reason: 'no GPU runner this week' } }), 'cancel');
  const gh = await githubProject(docket, org.admin, github, keys);
  const lin = await linearProject(docket, org.admin, github, keys, linear);
  const close = async () => {
    await github.close();
    await linear.close();
  };
  return { org, machineId, queuedRun: queued.id, cancelledRun: cancelled.id, githubProject: gh, linearProject: lin, close };
}
