// Docket's HTTP protocol as the benchmarks speak it (docs/protocol.md): an organization, runner
// machines, dispatch, claims and the attempt calls and reports a runner and its daemon make.

export const ADMIN_SECRET = 'bench-admin-secret';
export const CLI_VERSION = '0.1.0';
export const PROTOCOLS = ['process'];

/** @typedef {ReturnType<typeof import('./http.mjs').client>} Client */

/** @param {{ status: number, body: any }} res @param {number[]} ok @param {string} what */
function expectStatus(res, ok, what) {
  if (!ok.includes(res.status)) throw new Error(`${what}: HTTP ${res.status} ${JSON.stringify(res.body)}`);
  return res;
}

/** An organization and its admin member token. @param {Client} api @param {string} name */
export async function createOrg(api, name) {
  const res = expectStatus(await api.call('POST', '/v1/orgs', { token: ADMIN_SECRET, body: { name } }), [201], 'POST /v1/orgs');
  return { orgId: res.body.org.id, admin: res.body.token.token };
}

/**
 * Registers `count` runner machines with these labels and launch protocols.
 * @param {Client} api @param {string} admin @param {number} count @param {string[]} labels
 * @returns {Promise<{ machineId: string, token: string, protocols: string[] }[]>}
 */
export async function registerMachines(api, admin, count, labels, protocols = PROTOCOLS) {
  const machines = [];
  for (let i = 0; i < count; i++) {
    const reg = expectStatus(await api.call('POST', '/v1/tokens', { token: admin, body: { kind: 'registration' } }), [201], 'POST /v1/tokens');
    const res = expectStatus(
      await api.call('POST', '/v1/runners/register', {
        token: reg.body.token,
        body: { name: `bench-${i}`, labels, protocols, cli_version: CLI_VERSION },
      }),
      [201],
      'POST /v1/runners/register',
    );
    machines.push({ machineId: res.body.machine_id, token: res.body.machine_token, protocols });
  }
  return machines;
}

/** A registration token, for the runner CLI's own `register`. @param {Client} api @param {string} admin */
export async function registrationToken(api, admin) {
  return expectStatus(await api.call('POST', '/v1/tokens', { token: admin, body: { kind: 'registration' } }), [201], 'POST /v1/tokens').body.token;
}

/**
 * Dispatches one run; answers its id.
 * @param {Client} api @param {string} admin @param {{ labels?: string[], priority?: number }} [o]
 */
export async function dispatch(api, admin, { labels = ['linux'], priority = 0 } = {}) {
  const body = { brief: 'benchmark run', labels, priority, launch: { command: ['node', 'agent.mjs'] } };
  const res = await api.call('POST', '/v1/runs', { token: admin, body, headers: { 'Idempotency-Key': `bench-${crypto.randomUUID()}` } });
  return expectStatus(res, [201], 'POST /v1/runs').body.id;
}

/** @param {Client} api @param {string} token */
export async function heartbeat(api, token, protocols = PROTOCOLS) {
  expectStatus(await api.call('POST', '/v1/runners/heartbeat', { token, body: { cli_version: CLI_VERSION, protocols } }), [200], 'heartbeat');
}

/**
 * One claim: 200 with a grant or 204 after `waitMs`.
 * @param {Client} api @param {string} token @param {number} waitMs @param {AbortSignal} [signal]
 */
export async function claim(api, token, waitMs, signal, protocols = PROTOCOLS) {
  const res = await api.call('POST', '/v1/runners/claim', {
    token,
    body: { cli_version: CLI_VERSION, protocols, wait_ms: waitMs },
    timeoutMs: waitMs + 60_000,
    signal,
  });
  return expectStatus(res, [200, 204], 'POST /v1/runners/claim');
}

/**
 * What a claim cost, from its Docket-Cost header (src/lib/cost.ts).
 * @param {Headers} headers
 * @returns {{ d1_rows_read: number, d1_rows_written: number, do_requests: number } | null}
 */
export function parseCost(headers) {
  const value = headers.get('docket-cost');
  if (!value) return null;
  /** @type {Record<string, number>} */
  const out = {};
  for (const part of value.split(',')) {
    const [k, v] = part.trim().split('=');
    out[k] = Number(v);
  }
  return /** @type {any} */ (out);
}

/** The wait a runner sends with `launched` and `lease` (its lease_refresh_ms at Docket's defaults). */
export const LEASE_WAIT_MS = 20_000;

/**
 * What a simulated runner and its daemon send for one claimed run, as the runner CLI does: a
 * waiting `launched` call (docs/protocol.md, "Lease waits") in flight while the daemon sends a phase
 * report with output and the final report; the waiting call then answers 410 task_gone, the run
 * having ended. Answers the run's state after the final report.
 * @param {Client} api @param {string} machineToken @param {any} grant the claim's answer
 */
export async function runToCompletion(api, machineToken, grant) {
  const path = `/v1/runs/${grant.run_id}`;
  const launched = api.call('POST', `${path}/attempts/${grant.attempt}/launched`, {
    token: machineToken,
    body: { sandbox_id: `bench-${grant.run_id}`, wait_ms: LEASE_WAIT_MS },
    timeoutMs: LEASE_WAIT_MS + 60_000,
  });
  const daemon = grant.attempt_token;
  expectStatus(await api.call('POST', `${path}/reports`, { token: daemon, body: { phase: 'implementing', lines: ['working', 'still working'] } }), [200], 'report');
  const final = await api.call('POST', `${path}/reports`, {
    token: daemon,
    body: { final: { outcome: 'completed', exit_codes: { agent: 0 }, artifact: { patch: 'diff --git a/x b/x\n', limitations: [] }, cost_cents: 1 } },
  });
  const state = expectStatus(final, [200], 'final report').body.state;
  expectStatus(await launched, [200, 410], 'launched');
  return state;
}
