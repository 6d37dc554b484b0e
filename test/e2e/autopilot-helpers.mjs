// What the autopilot end-to-end tests share: GitHub's own example payloads moved to a test issue,
// signed webhook deliveries, waits on a ticket, on a run's tracker deliveries and on a project's
// scheduler, and the agents the run-lifecycle scenarios run whatever the tracker.

import { spawnSync } from 'node:child_process';
import { createHmac, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { agentScript, bareRepo, sleep } from './helpers.mjs';

const examples = createRequire(import.meta.url)('@octokit/webhooks-examples');

/** A person, as GitHub names the sender of a webhook. */
export const PERSON = { login: 'alice', type: 'User' };

/** A real example payload of `event`.`action` (@octokit/webhooks-examples), moved to `repository#number`; a label event names `readyLabel`. */
export function examplePayload(event, action, { repository, number, sender = PERSON, readyLabel = 'ready' }) {
  const p = structuredClone(examples.find((e) => e.name === event).examples.find((x) => x.action === action));
  p.issue.number = number;
  p.issue.repository_url = `https://api.github.com/repos/${repository}`;
  p.repository.full_name = repository;
  if (sender) p.sender = { ...p.sender, ...sender };
  if (p.label) p.label.name = readyLabel;
  return p;
}

/** Posts `payload` to the project's webhook as GitHub does, signed with `secret`: `{status, body}`. */
export async function deliverWebhook(docket, projectId, event, payload, { secret, deliveryId = randomUUID() }) {
  const body = JSON.stringify(payload);
  const signature = `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
  const res = await fetch(`${docket.url}/v1/autopilot/projects/${projectId}/webhook`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-github-event': event, 'x-github-delivery': deliveryId, 'x-hub-signature-256': signature },
    body,
  });
  return { status: res.status, body: await res.json() };
}

/** Polls `probe` every `intervalMs` until it returns something truthy; throws naming `what` (text, or a function giving it) after `timeoutMs`. */
export async function eventually(what, probe, timeoutMs = 60_000, intervalMs = 250) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${typeof what === 'function' ? what() : what}`);
    await sleep(intervalMs);
  }
}

/** The project's ticket for issue `number` with its history, or null while admission has not seen it. */
export async function readTicket(docket, token, projectId, number) {
  const res = await docket.api('GET', `/v1/autopilot/projects/${projectId}/tickets/${number}`, { token });
  return res.status === 200 ? res.body : null;
}

/** The ticket once `pred` holds of it. */
export async function waitForTicket(docket, token, projectId, number, pred, timeoutMs = 60_000) {
  let last = null;
  return eventually(
    () => `ticket ${number} to match: ${JSON.stringify(last)}`,
    async () => {
      last = await readTicket(docket, token, projectId, number);
      return last && pred(last) ? last : null;
    },
    timeoutMs,
  );
}

/** The run's tracker deliveries once `pred` holds of them. */
export async function waitForDeliveries(docket, token, runId, pred, timeoutMs = 60_000) {
  let last = null;
  return eventually(
    () => `the deliveries of ${runId} to match: ${JSON.stringify(last)}`,
    async () => {
      const res = await docket.api('GET', `/v1/runs/${runId}/deliveries`, { token });
      last = res.body;
      return res.status === 200 && pred(res.body.deliveries) ? res.body.deliveries : null;
    },
    timeoutMs,
  );
}

/** A bare repository at <base>/<repository> (a clone of a seeded one): the remote runs clone and push, and the fake GitHub's pull requests are of. */
export function bareRemote(base, repository) {
  const seed = bareRepo();
  const bare = join(base, ...repository.split('/'));
  mkdirSync(join(base, repository.split('/')[0]), { recursive: true });
  const r = spawnSync('git', ['clone', '--quiet', '--bare', seed.url, bare], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(r.stderr);
  return { bare, commit: seed.commit };
}

/** A project's scheduler view once `pred` holds of it. */
export async function waitForScheduler(docket, token, projectId, pred, timeoutMs = 30_000) {
  let last = null;
  return eventually(
    () => `the scheduler to match: ${JSON.stringify(last)}`,
    async () => {
      last = (await docket.api('GET', `/v1/autopilot/projects/${projectId}/scheduler`, { token })).body;
      return pred(last) ? last : null;
    },
    timeoutMs,
    200,
  );
}

/**
 * An agent in `dir` whose tool keeps running until the test lets it finish, then edits the checkout
 * and reports a result costing `costCents`: `script`, `toolStarted()` (resolves once the tool runs),
 * `letToolFinish()`.
 */
export function gatedToolAgent(dir, costCents = 50) {
  const started = join(dir, 'tool-started');
  const mayFinish = join(dir, 'tool-may-finish');
  const script = agentScript(dir, `
    import { existsSync, writeFileSync } from 'node:fs';
    console.log('::phase implementing');
    writeFileSync(${JSON.stringify(started)}, 'yes');
    const t = setInterval(() => {
      if (!existsSync(${JSON.stringify(mayFinish)})) return;
      clearInterval(t);
      writeFileSync('FASTER.txt', 'done\\n');
      writeFileSync(process.env.DOCKET_RESULT_FILE, JSON.stringify({ model: 'e2e-model', limitations: [], cost_cents: ${costCents} }));
    }, 100);
  `);
  return {
    script,
    toolStarted: () => eventually('the agent to start its tool', () => existsSync(started), 30_000, 100),
    letToolFinish: () => writeFileSync(mayFinish, 'go'),
  };
}

/** An agent in `dir` that greets the world in the README, one coding turn per launch: `script`, and `codingTurns(runId)`. */
export function turnCountingAgent(dir) {
  const turns = join(dir, 'turns.log');
  const script = agentScript(dir, `
    import { appendFileSync } from 'node:fs';
    appendFileSync(${JSON.stringify(turns)}, process.env.DOCKET_RUN_ID + '\\n');
    appendFileSync('README.md', 'hello, world\\n');
    console.log('::phase verifying');
  `);
  const codingTurns = (runId) => (existsSync(turns) ? readFileSync(turns, 'utf8').split('\n').filter((l) => l === runId).length : 0);
  return { script, codingTurns };
}

/**
 * An operator stops a run waiting in publishing at that boundary, the deployment restarts (with
 * `vars`) while it is paused, `meanwhile()` runs (the code host comes back), and the operator
 * resumes it.
 */
export async function pauseAcrossRestart(docket, token, runId, vars, meanwhile) {
  // Plain checks, not vitest's: scripts outside the test runner load this module too.
  const must = (ok, what, answer) => {
    if (!ok) throw new Error(`${what}: ${JSON.stringify(answer)}`);
  };
  const paused = await docket.api('POST', `/v1/runs/${runId}/pause`, { token, body: { reason: 'GitHub is down' } });
  must(paused.status === 200 && paused.body.state === 'paused' && paused.body.continuation === 'publishing' && paused.body.hold === true, 'the pause did not hold the run at publishing', paused);
  await docket.restart(vars);
  meanwhile();
  const after = (await docket.api('GET', `/v1/runs/${runId}`, { token })).body;
  must(after.state === 'paused' && after.hold === true, 'the run did not stay paused across the restart', after);
  const resumed = await docket.api('POST', `/v1/runs/${runId}/resume`, { token, body: {} });
  must(resumed.status === 200, 'the resume was refused', resumed);
}
