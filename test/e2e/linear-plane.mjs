// What the Linear end-to-end files share: a local Docket with an organization and a registered
// runner home, the Linear stand-in on loopback (test/fake-linear/), and the GitHub fake as the code
// host with a local bare repository as its remote; projects of a Linear team each point their team's
// webhook at the door the project answers. Everything it starts, `close()` stops.

import { expect } from 'vitest';
import { makeAppKeyPair, startFakeGitHub } from '../fake-github/server.mjs';
import { startFakeLinear } from '../fake-linear/server.mjs';
import { bareRemote, readTicket, waitForTicket } from './autopilot-helpers.mjs';
import { createOrg, RunnerHome, removeTempDirs, startDocket, tempDir } from './helpers.mjs';

export const REPO = 'acme/widgets';
export const SIGNING_SECRET = 'lin_wh_the_e2e_projects_signing_secret';
export const BRIEF = '## Agent Brief\n\ngoal: Fix the greeting in the README.\nacceptance:\n- the README greets the world\n';

/** Starts the plane with Docket's variables `vars` and an organization named `orgName`. */
export async function startLinearPlane(vars, orgName) {
  const keys = makeAppKeyPair();
  const base = tempDir('remotes');
  const { bare } = bareRemote(base, REPO);
  const github = await startFakeGitHub({ appId: '1001', installationId: '2002', publicKey: keys.publicKey, htmlUrlBase: base });
  github.publication.useBareRepository(REPO, bare);
  const linear = await startFakeLinear({ urlKey: 'acme' });
  linear.state.addLabel('ready');
  const docket = await startDocket(vars);
  const org = await createOrg(docket, orgName);
  const home = new RunnerHome();
  const reg = home.run(['register', '--server', docket.url, '--token', org.registration]);
  expect(reg.code, reg.stderr).toBe(0);
  const alice = () => linear.state.person('Alice Human');

  /** A project of Linear team `team` whose runs run `script` on runners with `labels`: its id. */
  async function project(team, script, labels = []) {
    linear.state.addTeam(team, team);
    const created = await docket.api('POST', '/v1/autopilot/projects', {
      token: org.admin,
      body: {
        name: `${team.toLowerCase()} from linear`,
        repository: REPO,
        tracker: { kind: 'linear', api_url: linear.url, workspace: 'acme', team, ready_label: 'ready', review_state: 'In Review', api_key: linear.apiKey },
        run: { launch: { command: [process.execPath, script] }, labels, repository_url: bare },
        webhook_secret: SIGNING_SECRET,
        github: { api_url: github.url, app_id: '1001', installation_id: '2002', private_key: keys.privateKey },
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(JSON.stringify(created.body)).not.toContain(linear.apiKey);
    linear.state.subscribe({ url: created.body.webhook.url, secret: SIGNING_SECRET, team });
    return created.body.id;
  }

  /** A new issue of `team` with an Agent Brief, created by a person (its create webhook delivered). */
  async function newIssue(team, title, extra = {}) {
    return (await linear.state.createIssue({ team, title, description: BRIEF, by: alice(), ...extra })).value;
  }

  /** The project's ticket of `issue` once `pred` holds of it. */
  const ticketOf = (projectId, issue, pred, timeoutMs = 60_000) => waitForTicket(docket, org.admin, projectId, issue.number, pred, timeoutMs);

  async function close() {
    await home.cleanup();
    await docket.stop();
    await github.close();
    await linear.close();
    removeTempDirs();
  }

  return { docket, github, linear, org, home, bare, alice, project, newIssue, ticketOf, readTicket: (projectId, issue) => readTicket(docket, org.admin, projectId, issue.number), close };
}
