// A listener killed while its claim long-poll waits leaves that claim open at the server, its
// answer read by no one. Started again, the listener claims again, and its new claim ends the old
// one (docs/protocol.md, "Runner protocol"): the next run goes to the listener that is there, at
// attempt 1, instead of sitting claimed by the dead claim until its lease lapses and going to a
// second attempt.
import { afterAll, expect, it } from 'vitest';
import { agentScript, dispatch, runnerSuite, sleep, waitForRun } from './helpers.mjs';
import { startRecordingProxy } from './recording-proxy.mjs';

const { home, scratch, start } = runnerSuite(afterAll);
/** @type {Awaited<ReturnType<typeof startRecordingProxy>> | undefined} */
let proxy;
afterAll(async () => proxy?.stop());

/** @param {() => boolean} pred */
async function until(pred, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await sleep(50);
  }
}

it('a listener killed while its claim waits takes the next run itself once started again, at attempt 1', async () => {
  // Claims wait 20 s, so the dead listener's claim is still waiting when the run is dispatched.
  const { docket, org } = await start({ CLAIM_WAIT_MS: '20000' });
  proxy = await startRecordingProxy(docket.url);
  const claims = () => proxy.started.filter((c) => c.path === '/v1/runners/claim').length;

  const first = home.listen(['--server', proxy.url]);
  await until(() => claims() === 1);
  await sleep(300); // through the proxy to the scheduler
  await first.kill('SIGKILL');

  const second = home.listen(['--server', proxy.url]);
  await until(() => claims() === 2);
  await sleep(300);
  const agent = agentScript(scratch, "console.log('hello from the agent');");
  const run = await dispatch(docket, org.admin, { launch: { protocol: 'process', command: [process.execPath, agent] } });

  const ended = await waitForRun(docket, org.admin, run.id, (r) => r.state === 'completed' || r.state === 'failed', 15_000);
  expect(ended).toMatchObject({ state: 'completed', attempt: 1 });
  await second.waitFor((e) => e.event === 'run_ended' && e.run_id === run.id);
});
