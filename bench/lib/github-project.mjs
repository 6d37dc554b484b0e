// An autopilot project as the autopilot benchmark sets it up (docs/BENCHMARKS.md, "Autopilot within
// GitHub's budget"): the GitHub stand-in (test/fake-github/server.mjs) behind the counting proxy
// (github-counter.mjs), a project of a local Docket pointed at the proxy, ready issues labelled by a
// person, signed webhook deliveries, and the cron tick triggered by hand. Nothing leaves loopback.
import { createHmac, randomUUID } from 'node:crypto';
import { makeAppKeyPair, startFakeGitHub } from '../../test/fake-github/server.mjs';
export { eventually } from '../../test/e2e/autopilot-helpers.mjs';
import { createOrg } from './docket.mjs';
import { startGitHubCounter } from './github-counter.mjs';

export const REPO = 'acme/widgets';
const WEBHOOK_SECRET = 'a-webhook-secret-for-the-autopilot-bench';
const PERSON = { login: 'alice', type: 'User' };
const BRIEF = '## Agent Brief\n\ngoal: Fix the greeting in the README.\nacceptance:\n- the README greets the world\n';

/** What a Docket needs to hold autopilot projects whose GitHub is on loopback (README, "Configuration"). */
export const AUTOPILOT_VARS = { OUTBOUND_ALLOW_LOOPBACK: 'true', AUTOPILOT_SECRET_KEY: 'bench-autopilot-secret-key-0123456789abcdef' };

/** One RSA key pair for every stand-in of the run: making one takes a while. */
let appKeys = null;

/**
 * The stand-in and its counter; `htmlUrlBase` (a local directory) makes the repository URL
 * admission derives from the issues a local bare repository (publication).
 * @param {{ htmlUrlBase?: string }} [o]
 */
export async function startStandIn({ htmlUrlBase } = {}) {
  appKeys ??= makeAppKeyPair();
  const github = await startFakeGitHub({ appId: '1001', installationId: '2002', publicKey: appKeys.publicKey, ...(htmlUrlBase ? { htmlUrlBase } : {}) });
  const counter = await startGitHubCounter(github.url);
  return {
    github,
    counter,
    privateKey: appKeys.privateKey,
    /** Issues `from`..`to` of `repository` exist, labelled ready by a person, with no webhook delivered. */
    addReadyIssues(from, to, repository = REPO) {
      for (let number = from; number <= to; number++) {
        github.state.addIssue(repository, number, { title: `Issue ${number}`, body: BRIEF, labels: [] });
        github.state.label(repository, number, 'ready', PERSON);
      }
    },
    stop: async () => {
      await counter.stop();
      await github.close();
    },
  };
}

/**
 * An organization and one project of it on the stand-in (through its counter), watching `repository`.
 * @param {import('./docket.mjs').Client} api @param {Awaited<ReturnType<typeof startStandIn>>} standIn
 * @param {{ name: string, queueCapacity: number, launch?: string[], repository?: string }} o
 */
export async function createProject(api, standIn, { name, queueCapacity, launch = ['agent', 'run'], repository = REPO }) {
  const org = await createOrg(api, `bench-${name}`);
  const res = await api.call('POST', '/v1/autopilot/projects', {
    token: org.admin,
    body: {
      name,
      repository,
      ready_label: 'ready',
      queue_capacity: queueCapacity,
      run: { launch: { command: launch }, labels: [] },
      webhook_secret: WEBHOOK_SECRET,
      github: { api_url: standIn.counter.url, app_id: '1001', installation_id: '2002', private_key: standIn.privateKey },
    },
  });
  if (res.status !== 201) throw new Error(`POST /v1/autopilot/projects: ${res.status} ${JSON.stringify(res.body)}`);
  return { org, projectId: /** @type {string} */ (res.body.id) };
}

/**
 * Delivers the `labeled` event of issue `number` as GitHub does (signed, the issue as the stand-in
 * holds it, as GitHub's payload states it), under `deliveryId`; answers the HTTP status, or 0 when
 * the connection failed.
 * @param {import('./docket.mjs').Client} api @param {Awaited<ReturnType<typeof startStandIn>>} standIn
 * @param {string} projectId @param {number} number
 */
export async function deliverLabeled(api, standIn, projectId, number, deliveryId = randomUUID()) {
  const [owner, name] = REPO.split('/');
  const payload = {
    action: 'labeled',
    issue: standIn.github.state.issueJson(REPO, number),
    label: { name: 'ready', color: '0e8a16', default: false, description: null },
    repository: { name, full_name: REPO, private: true, owner: { login: owner, type: 'Organization' } },
    sender: PERSON,
    installation: { id: Number(standIn.github.installationId) },
  };
  const body = JSON.stringify(payload);
  try {
    const res = await fetch(`${api.base}/v1/autopilot/projects/${projectId}/webhook`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'issues',
        'x-github-delivery': deliveryId,
        'x-hub-signature-256': `sha256=${createHmac('sha256', WEBHOOK_SECRET).update(body).digest('hex')}`,
      },
      body,
      signal: AbortSignal.timeout(30_000),
    });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0;
  }
}

/** One cron tick of the local Worker, run to its end (started with testScheduled: wrangler's /__scheduled). @param {string} url */
export async function cronTick(url) {
  const res = await fetch(`${url}/__scheduled?cron=${encodeURIComponent('* * * * *')}`, { signal: AbortSignal.timeout(120_000) });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`the cron tick answered ${res.status}: ${text.slice(0, 200)}`);
}

/** The project's ticket for issue `number`, or null while admission has not seen it. @param {import('./docket.mjs').Client} api */
export async function readTicket(api, token, projectId, number) {
  const res = await api.call('GET', `/v1/autopilot/projects/${projectId}/tickets/${number}`, { token });
  return res.status === 200 ? res.body : null;
}
