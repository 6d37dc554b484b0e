// What the autopilot end-to-end tests share: GitHub's own example payloads moved to a test issue,
// signed webhook deliveries, and waits on a ticket and on a run's tracker deliveries.

import { spawnSync } from 'node:child_process';
import { createHmac, randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { bareRepo, sleep } from './helpers.mjs';

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
