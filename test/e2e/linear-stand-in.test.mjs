// The Linear stand-in (test/fake-linear/) speaks Linear as @linear/sdk expects it: queries are
// executed against Linear's schema, so an unknown field fails; the API key is checked; and its
// webhooks are signed so that the SDK's own LinearWebhookClient verifies them, and refuses a stale one.

import { createServer } from 'node:http';
import { LinearClient } from '@linear/sdk';
import { LinearWebhookClient } from '@linear/sdk/webhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeLinear } from '../fake-linear/server.mjs';

const SECRET = 'lin_wh_stand_in_secret';
/** @type {Awaited<ReturnType<typeof startFakeLinear>>} */
let linear;
let receiver;
const received = [];

beforeAll(async () => {
  linear = await startFakeLinear();
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      received.push({ headers: req.headers, body });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  linear.state.subscribe({ url: `http://127.0.0.1:${receiver.address().port}/hook`, secret: SECRET });
  linear.state.addTeam('ENG', 'Engineering');
  linear.state.addLabel('ready');
});

afterAll(async () => {
  await linear?.close();
  receiver?.close();
});

const client = (apiKey = linear.apiKey) => new LinearClient({ apiKey, apiUrl: linear.url }).client;

describe('the Linear stand-in', () => {
  it("answers an issue's fields, blockers and history through @linear/sdk, with Linear's rate-limit headers", async () => {
    const { value: blocked } = await linear.state.createIssue({ team: 'ENG', title: 'Dark mode', description: 'brief' });
    const { value: blocker } = await linear.state.createIssue({ team: 'ENG', title: 'Theme tokens' });
    await linear.state.block(blocker, blocked);
    await linear.state.label(blocked, 'ready', linear.state.app('Zapier'));
    const res = await client().rawRequest(
      'query Issue($id: String!) { issue(id: $id) { identifier state { type } labels { nodes { name } } inverseRelations { nodes { type issue { identifier } } } history(first: 1) { nodes { actor { app } botActor { type name } addedLabels { name } } } } }',
      { id: linear.state.identifier(blocked) },
    );
    expect(res.data.issue).toMatchObject({
      identifier: 'ENG-1',
      state: { type: 'unstarted' },
      labels: { nodes: [{ name: 'ready' }] },
      inverseRelations: { nodes: [{ type: 'blocks', issue: { identifier: 'ENG-2' } }] },
      history: { nodes: [{ actor: { app: true }, botActor: { type: 'oauthClient', name: 'Zapier' }, addedLabels: [{ name: 'ready' }] }] },
    });
    expect(Number(res.headers.get('x-ratelimit-requests-remaining'))).toBeLessThan(Number(res.headers.get('x-ratelimit-requests-limit')));
  });

  it('a query for a field the schema lacks fails instead of reading null', async () => {
    await expect(client().rawRequest('query { viewer { id notAField } }')).rejects.toThrow(/Cannot query field "notAField"/);
  });

  it('a request without a known API key is refused as unauthenticated', async () => {
    await expect(client('lin_api_not_a_key').rawRequest('query { viewer { id } }')).rejects.toMatchObject({ type: 'AuthenticationError' });
  });

  it("signs each webhook so that LinearWebhookClient verifies it, and one with a stale webhookTimestamp is refused", async () => {
    received.length = 0;
    const { value: issue } = await linear.state.createIssue({ team: 'ENG', title: 'Signed' });
    await linear.state.label(issue, 'ready', linear.state.person('Alice'));
    const verifier = new LinearWebhookClient(SECRET);
    const [created, labelled] = received.map((r) => verifier.parseData(Buffer.from(r.body), r.headers['linear-signature']));
    expect(created).toMatchObject({ type: 'Issue', action: 'create', data: { identifier: 'ENG-3' } });
    expect(labelled).toMatchObject({ type: 'Issue', action: 'update', actor: { type: 'user', name: 'Alice' }, data: { labels: [{ name: 'ready' }] }, updatedFrom: { labelIds: [] } });
    expect(received[0].headers['linear-delivery']).not.toBe(received[1].headers['linear-delivery']);

    linear.state.staleNextWebhook(120_000);
    await linear.state.comment(issue, 'late', linear.state.person('Alice'));
    const stale = received.at(-1);
    expect(() => verifier.parseData(Buffer.from(stale.body), stale.headers['linear-signature'])).toThrow(/timestamp/);
  });
});
