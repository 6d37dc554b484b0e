// A run that completes while its listener is down: the next start records the real end
// (completed, not `gone`) and keeps the sandbox's log, with the real CLI against a local Worker.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { agentScript, dispatch, runnerSuite, waitForRun } from './helpers.mjs';

const { home, scratch, start } = runnerSuite(afterAll);

it('a run that completed while the listener was down is recorded completed, and its sandbox.log is kept', async () => {
  const { docket, org } = await start();
  const go = join(scratch, 'go');
  const agent = agentScript(scratch, `
    import { existsSync } from 'node:fs';
    console.log('agent waiting');
    const t = setInterval(() => {
      if (existsSync(${JSON.stringify(go)})) { clearInterval(t); console.log('agent done'); }
    }, 100);
  `);
  const run = await dispatch(docket, org.admin, { launch: { command: [process.execPath, agent] } });
  const first = home.listen();
  await first.waitFor((e) => e.event === 'launched' && e.run_id === run.id);
  await waitForRun(docket, org.admin, run.id, (r) => r.state === 'implementing');
  expect((await first.kill('SIGTERM')).code).toBe(0); // the sandbox is left running

  // With no listener, the agent finishes and its daemon delivers the final report.
  writeFileSync(go, 'go');
  await waitForRun(docket, org.admin, run.id, (r) => r.state === 'completed', 60_000);

  const second = home.listen();
  const ended = await second.waitFor((e) => e.event === 'run_ended' && e.run_id === run.id, 60_000);
  expect(ended.outcome).toBe('completed');
  expect(second.events.some((e) => e.event === 'destroying' && e.run_id === run.id)).toBe(false);
  const job = home.jobs().find((j) => j.run_id === run.id);
  expect(job).toMatchObject({ state: 'done', outcome: 'completed' });
  const log = join(job.job_dir, 'sandbox.log');
  expect(existsSync(log)).toBe(true);
  expect(readFileSync(log, 'utf8')).toContain('agent done');
  expect((await second.kill('SIGTERM')).code).toBe(0);
});
