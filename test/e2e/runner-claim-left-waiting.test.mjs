// A listener that stops while its claim long-poll waits leaves that claim open at the server, where
// a run dispatched meanwhile would be handed to an answer no one reads: the run would sit claimed
// until its lease lapsed and take a second attempt. A listener stopped by a signal ends its claim
// (POST /v1/runners/claim/cancel), and one killed outright has it ended by its next start's first
// claim (docs/protocol.md, "Runner protocol"): either way the run goes to a listener that is there,
// at attempt 1.
import { afterAll, expect, it } from 'vitest';
import { agentScript, dispatch, runnerSuite, sleep, until, waitForRun } from './helpers.mjs';
import { startRecordingProxy } from './recording-proxy.mjs';

const { home, scratch, start } = runnerSuite(afterAll);
/** @type {Promise<{ docket: any, org: any, proxy: Awaited<ReturnType<typeof startRecordingProxy>> }> | undefined} */
let setup;
afterAll(async () => (await setup)?.proxy.stop());

/** One local Docket for the file, its claims waiting 20 s, so a claim left behind still waits when the run is dispatched. */
function plane() {
  setup ??= start({ CLAIM_WAIT_MS: '20000' }).then(async ({ docket, org }) => ({ docket, org, proxy: await startRecordingProxy(docket.url) }));
  return setup;
}

/** A listener through the proxy, once its claim waits at the server. @param {Awaited<ReturnType<typeof plane>>['proxy']} proxy */
async function listeningAndClaiming(proxy) {
  const claims = () => proxy.started.filter((c) => c.path === '/v1/runners/claim').length;
  const before = claims();
  const listener = home.listen(['--server', proxy.url]);
  await until(() => claims() > before);
  await sleep(300); // through the proxy to the scheduler
  return listener;
}

/** @param {any} docket @param {any} org */
function dispatchHello(docket, org) {
  const agent = agentScript(scratch, "console.log('hello from the agent');");
  return dispatch(docket, org.admin, { launch: { protocol: 'process', command: [process.execPath, agent] } });
}

it('a listener stopped by SIGTERM while its claim waits ends the claim: a run dispatched after stays queued, and the next listener takes it at attempt 1', async () => {
  const { docket, org, proxy } = await plane();
  const stopped = await listeningAndClaiming(proxy);
  expect((await stopped.kill('SIGTERM')).code).toBe(0);
  expect(stopped.events.find((e) => e.event === 'claim_cancel_failed')).toBeUndefined();

  const run = await dispatchHello(docket, org);
  await sleep(1_000);
  expect((await docket.api('GET', `/v1/runs/${run.id}`, { token: org.admin })).body).toMatchObject({ state: 'queued', attempt: 0 });

  const next = home.listen(['--server', proxy.url]);
  const ended = await waitForRun(docket, org.admin, run.id, (r) => r.state === 'completed' || r.state === 'failed', 15_000);
  expect(ended).toMatchObject({ state: 'completed', attempt: 1 });
  await next.kill('SIGTERM');
});

it('a listener killed while its claim waits takes the next run itself once started again, at attempt 1', async () => {
  const { docket, org, proxy } = await plane();
  const killed = await listeningAndClaiming(proxy);
  await killed.kill('SIGKILL');

  const second = await listeningAndClaiming(proxy);
  const run = await dispatchHello(docket, org);
  const ended = await waitForRun(docket, org.admin, run.id, (r) => r.state === 'completed' || r.state === 'failed', 15_000);
  expect(ended).toMatchObject({ state: 'completed', attempt: 1 });
  await second.waitFor((e) => e.event === 'run_ended' && e.run_id === run.id);
});
