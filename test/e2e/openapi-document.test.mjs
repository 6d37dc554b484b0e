// The OpenAPI document as a deployment serves it, read from outside the way a new user's tools read
// it: valid OpenAPI 3.1, every reference resolving, one operationId per operation, and the /docs
// reference page loading its renderer from the deployment itself.
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_SECRET, removeTempDirs, startDocket } from './helpers.mjs';
import { ContractChecker, DocumentClient, documentProblems } from './openapi-check.mjs';

/** @type {Awaited<ReturnType<typeof startDocket>>} */
let docket;
/** @type {any} */
let doc;

beforeAll(async () => {
  docket = await startDocket();
  const res = await fetch(`${docket.url}/v1/openapi.json`, { signal: AbortSignal.timeout(30_000) });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  doc = await res.json();
}, 120_000);

afterAll(async () => {
  await docket?.stop();
  removeTempDirs();
});

describe('GET /v1/openapi.json', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc));
    // Each error names where in the document it is, so a failure points at the operation to fix.
    const errors = (result.errors ?? []).map((/** @type {any} */ e) => `${e.instancePath}: ${e.message}`);
    expect(errors, 'the document breaks the OpenAPI 3.1 schema').toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('resolves every $ref inside itself and gives every operation its own operationId', () => {
    expect(documentProblems(doc)).toEqual([]);
    expect(Object.keys(doc.paths).length).toBeGreaterThan(0);
  });

  it('describes the calls made here as the checker reads them, and refuses an answer that breaks its schema', () => {
    const checker = new ContractChecker(doc);
    // The checker itself: a described call is found, an undescribed one is named, a wrong body fails.
    expect(checker.find('POST', '/v1/orgs')?.operationId).toBe('createOrg');
    expect(checker.check({ method: 'POST', path: '/v1/no-such-thing', status: 404 })).toEqual([
      'POST /v1/no-such-thing: the document describes no such operation',
    ]);
    const wrong = checker.check({
      method: 'POST', path: '/v1/orgs', requestBody: JSON.stringify({ name: 'acme' }), requestType: 'application/json',
      status: 201, responseBody: JSON.stringify({ org: { id: 42 } }), responseType: 'application/json',
    });
    expect(wrong.join('\n')).toMatch(/createOrg.*answered 201: answer body does not match its schema/);
    expect(checker.check({ method: 'POST', path: '/v1/orgs', status: 418, responseBody: '{}', responseType: 'application/json' }).join('\n'))
      .toMatch(/status 418 is not declared/);
  });

  it('matches real exchanges: an organization, a token, a refusal', async () => {
    const checker = new ContractChecker(doc);
    const exchanges = [];
    const call = async (/** @type {string} */ method, /** @type {string} */ path, /** @type {string} */ token, /** @type {any} */ body) => {
      const requestBody = body === undefined ? '' : JSON.stringify(body);
      const res = await fetch(docket.url + path, {
        method, body: requestBody || undefined, signal: AbortSignal.timeout(30_000),
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      });
      const x = { method, path, requestBody, requestType: 'application/json', status: res.status, responseBody: await res.text(), responseType: res.headers.get('content-type') };
      exchanges.push(x);
      return { status: res.status, body: JSON.parse(x.responseBody) };
    };
    const org = await call('POST', '/v1/orgs', ADMIN_SECRET, { name: 'doc-check' });
    expect(org.status).toBe(201);
    const admin = org.body.token.token;
    expect((await call('POST', '/v1/tokens', admin, { kind: 'registration', max_uses: 2 })).status).toBe(201);
    expect((await call('GET', '/v1/tokens?limit=5', admin, undefined)).status).toBe(200);
    expect((await call('POST', '/v1/tokens', 'dkt_m_wrong', { kind: 'member' })).status).toBe(401);
    expect(exchanges.flatMap((x) => checker.check(x))).toEqual([]);
    // A malformed body: refused with a 400 the document declares, and the checker sees it breaks the schema.
    expect((await call('POST', '/v1/tokens', admin, { kind: 'nonsense' })).status).toBe(400);
    const refused = /** @type {any} */ (exchanges.at(-1));
    expect(checker.check(refused, { refusalExpected: true })).toEqual([]);
    expect(checker.check(refused).join('\n')).toMatch(/createToken.*answered 400: request body does not match its schema: \/kind/);
  });
});

describe('a client that knows only the document', () => {
  it('creates an organization and tokens, dispatches, reads and cancels a run, by operationId, and every answer keeps the document', async () => {
    const client = new DocumentClient(doc, docket.url, { adminSecret: ADMIN_SECRET });
    const org = await client.call('createOrg', { body: { name: 'generic-client' } });
    expect(org.status).toBe(201);
    client.credentials.memberToken = org.body.token.token;
    const member = await client.call('createToken', { body: { kind: 'member', role: 'member', name: 'reader' } });
    expect(member.status).toBe(201);
    const listed = await client.call('listTokens', { query: { limit: 10 } });
    expect(listed.status).toBe(200);
    expect(listed.body.tokens.map((/** @type {any} */ t) => t.id)).toContain(member.body.id);
    expect((await client.call('revokeToken', { path: { id: member.body.id } })).status).toBe(200);
    expect((await client.call('rotateCallbackSecret', { body: {} })).status).toBe(200);

    // A run no runner will take: dispatched, read back, cancelled while queued.
    const run = await client.call('createRun', {
      headers: { 'Idempotency-Key': `generic-${Math.random().toString(36).slice(2)}` },
      body: { brief: 'from the document alone', launch: { protocol: 'process', command: ['true'] } },
    });
    expect(run.status, JSON.stringify(run.body)).toBe(201);
    expect((await client.call('getRun', { path: { id: run.body.id } })).body.state).toBe('queued');
    const cancelled = await client.call('cancelRun', { path: { id: run.body.id }, body: { reason: 'generic client' } });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.state).toBe('cancelled');
    expect((await client.call('listRuns', { query: { limit: 5 } })).status).toBe(200);
    expect((await client.call('listRunEvents', { path: { id: run.body.id }, query: { limit: 10 } })).status).toBe(200);

    expect(new ContractChecker(doc).checkAll(client.exchanges)).toEqual([]);
  });

  it('configures an autopilot project, reads it back and changes it, by operationId, and no answer holds a secret', async () => {
    const client = new DocumentClient(doc, docket.url, { adminSecret: ADMIN_SECRET });
    const org = await client.call('createOrg', { body: { name: 'autopilot-client' } });
    client.credentials.memberToken = org.body.token.token;
    const webhookSecret = 'outside-webhook-secret-0123456789';
    const privateKey = '-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n-----END RSA PRIVATE KEY-----\n';
    const created = await client.call('createAutopilotProject', {
      body: {
        name: 'hello world',
        repository: 'Codertocat/Hello-World',
        run: { launch: { command: ['agent'] } },
        webhook_secret: webhookSecret,
        github: { app_id: '12345', installation_id: '67890', private_key: privateKey },
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body.webhook.url).toBe(`${docket.url}/v1/autopilot/projects/${created.body.id}/webhook`);
    const changed = await client.call('updateAutopilotProject', { path: { id: created.body.id }, body: { ready_label: 'agent-ready' } });
    expect(changed.body.ready_label).toBe('agent-ready');
    // A project's own read adds what it costs GitHub and how its reconciliation stands to the configuration.
    const read = (await client.call('getAutopilotProject', { path: { id: created.body.id } })).body;
    const { github_budget, reconciliation, last_error, ...configuration } = read;
    expect(configuration).toEqual(changed.body);
    expect({ requests_last_hour: github_budget.requests_last_hour, state: reconciliation.state, last_error }).toEqual({ requests_last_hour: 0, state: 'running', last_error: null });
    expect((await client.call('listAutopilotProjects', { query: { limit: 5 } })).body.projects.map((/** @type {any} */ p) => p.id)).toEqual([created.body.id]);
    for (const exchange of client.exchanges) expect(JSON.stringify(exchange.responseBody)).not.toMatch(/outside-webhook-secret|PRIVATE KEY/);
    expect(new ContractChecker(doc).checkAll(client.exchanges)).toEqual([]);
  });
});

describe('GET /docs', () => {
  it('is an HTML page that loads the renderer from this deployment, and the renderer is served', async () => {
    const page = await fetch(`${docket.url}/docs`, { signal: AbortSignal.timeout(30_000) });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await page.text();
    expect(html).toMatch(/<html[\s>]/i);
    expect(html).toContain('src="/docs/assets/swagger-ui-bundle.js"');
    expect(html).toContain('/v1/openapi.json');

    const script = await fetch(`${docket.url}/docs/assets/swagger-ui-bundle.js`, { signal: AbortSignal.timeout(30_000) });
    expect(script.status).toBe(200);
    expect(script.headers.get('content-type')).toMatch(/^(text|application)\/javascript/);
    const source = await script.text();
    expect(source.length).toBeGreaterThan(100_000);
    expect(source).toContain('SwaggerUIBundle');

    const unknown = await fetch(`${docket.url}/docs/assets/secrets.txt`, { signal: AbortSignal.timeout(30_000) });
    expect(unknown.status).toBe(404);
  });
});
