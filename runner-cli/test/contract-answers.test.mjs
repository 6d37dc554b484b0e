// The runner's client decodes every answer with the contract (src/protocol/runners.ts): a server
// that renamed or dropped a field makes the call fail at once with an error naming the call and
// the field, instead of the runner crashing later on an undefined value.
import { afterEach, describe, expect, it } from 'vitest';
import { ApiError, classify, DocketClient } from '../src/api.ts';
import { attemptAnswerBody, heartbeatAnswer, MACHINE_ID, RUN_ID, runnerConfig } from './helpers/answers.mjs';
import { fakeServer } from './helpers/fake-server.mjs';

const cleanups = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f();
});

async function clientFor(answer) {
  const server = await fakeServer(answer);
  cleanups.push(server.close);
  return new DocketClient({ serverUrl: server.url, token: 'dkt_s_t', timeoutMs: 5_000 });
}

const beat = { cli_version: '1.0.0', protocols: ['process'] };

/** The ApiError a call fails with. */
async function failure(promise) {
  const e = await promise.then(() => null, (err) => err);
  expect(e).toBeInstanceOf(ApiError);
  return e;
}

describe('answers the contract does not describe', () => {
  it('a heartbeat answer with a renamed field is a bad_answer naming the call and the field', async () => {
    const { server_time_ms, ...rest } = heartbeatAnswer();
    const client = await clientFor(() => ({ status: 200, body: { ...rest, server_time: server_time_ms } }));
    const e = await failure(client.heartbeat(beat));
    expect(e.code).toBe('bad_answer');
    expect(e.status).toBe(200);
    expect(e.message).toContain('POST /v1/runners/heartbeat');
    expect(e.message).toContain('server_time_ms');
    expect(classify(e)).toBe('transient'); // backed off and retried, never a crash
  });

  it('a claim grant without its launch command names the nested field', async () => {
    const grant = {
      run_id: RUN_ID, attempt: 1, attempt_token: 'dkt_a_t', lease_expires_at_ms: Date.now() + 5000, lease_ttl_ms: 5000,
      lease_refresh_ms: 300, launch_deadline_at_ms: Date.now() + 60_000, sandbox_lifetime_ms: 600_000, brief: 'b', repository: null,
      launch: { protocol: 'process', image: null, env: {} },
    };
    const client = await clientFor(() => ({ status: 200, body: grant }));
    const e = await failure(client.claim({ ...beat, wait_ms: 0 }));
    expect(e.code).toBe('bad_answer');
    expect(e.message).toContain('POST /v1/runners/claim');
    expect(e.message).toContain('launch.command');
  });

  it('a 204 claim has no body to decode, and a complete grant is handed back as sent', async () => {
    let n = 0;
    const grant = {
      run_id: RUN_ID, attempt: 2, attempt_token: 'dkt_a_t', lease_expires_at_ms: 1, lease_ttl_ms: 5000, lease_refresh_ms: 300,
      launch_deadline_at_ms: 2, sandbox_lifetime_ms: 600_000, brief: 'b', repository: { url: 'https://example.test/r.git', commit: null },
      launch: { protocol: 'process', command: ['true'], image: null, env: {} },
    };
    const client = await clientFor(() => (++n === 1 ? { status: 204 } : { status: 200, body: grant }));
    expect(await client.claim({ ...beat, wait_ms: 0 })).toEqual({ status: 204, body: null });
    expect(await client.claim({ ...beat, wait_ms: 0 })).toEqual({ status: 200, body: grant });
  });

  it('an attempt call or report answer with a state the protocol does not know is refused', async () => {
    const client = await clientFor(() => ({ status: 200, body: attemptAnswerBody({ state: 'running' }) }));
    const e = await failure(client.attemptCall(RUN_ID, 1, 'lease'));
    expect(e.code).toBe('bad_answer');
    expect(e.message).toContain(`/v1/runs/${RUN_ID}/attempts/1/lease`);
    expect(e.message).toContain('state');
    const r = await failure(client.report(RUN_ID, { seq: 1, lines: [] }));
    expect(r.message).toContain('/reports');
    expect(r.message).toContain('state');
  });

  it('a registration answer without the machine token is refused before anything is saved', async () => {
    const client = await clientFor(() => ({ status: 201, body: { machine_id: MACHINE_ID, org_id: 'org_000000000000000000000001', config: runnerConfig } }));
    const e = await failure(client.register('dkt_r_t', { name: 'box', protocols: ['process'], cli_version: '1.0.0' }));
    expect(e.code).toBe('bad_answer');
    expect(e.message).toContain('machine_token');
  });
});
