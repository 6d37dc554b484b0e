// A server that answers 426 listener_upgrade_required makes the runner exit cleanly, with its
// sandbox left running; the next start (on a server that accepts it) reconciles and finishes it.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { agentScript, dispatch, groupAlive, runnerSuite, waitForRun } from './helpers.mjs';

const { home, scratch, start } = runnerSuite(afterAll);

it('a server that answers 426 makes the runner exit cleanly with the sandbox left, and a later start reconciles it', async () => {
  const { docket, org } = await start();
  const go = join(scratch, 'go');
  const agent = agentScript(scratch, `
    import { existsSync, writeFileSync } from 'node:fs';
    console.log('agent waiting');
    const t = setInterval(() => {
      if (existsSync(${JSON.stringify(go)})) { clearInterval(t); writeFileSync('OUT.txt', 'ok\\n'); }
    }, 100);
  `);
  const run = await dispatch(docket, org.admin, { launch: { command: [process.execPath, agent] } });
  const first = home.listen();
  const launched = await first.waitFor((e) => e.event === 'launched' && e.run_id === run.id);
  const pid = Number(String(launched.sandbox_id).replace('process-', ''));
  await waitForRun(docket, org.admin, run.id, (r) => r.state === 'implementing');

  // The operator raises the minimum CLI version: the next heartbeat is refused with 426.
  await docket.restart({ MIN_CLI_VERSION: '99.0.0' });
  const exit = await first.exited;
  expect(exit.code).toBe(3);
  const upgrade = first.events.find((e) => e.event === 'upgrade_required');
  expect(upgrade.min_cli_version).toBe('99.0.0');
  // The runner prints how this deployment distributes its runner, as the server's 426 said.
  expect(upgrade.upgrade).toContain('npm install -g ./docket-runner-<version>.tgz');
  expect(upgrade.message).toContain(upgrade.upgrade);
  expect(upgrade.message).not.toContain('docket-runner@latest');
  expect(groupAlive(pid)).toBe(true); // the sandbox was left running
  expect(home.jobs().find((j) => j.run_id === run.id)?.state).toBe('interrupted');

  // A start against a server that still refuses exits the same way, before touching any job.
  const refused = home.run(['listen', '--json']);
  expect(refused.code).toBe(3);
  expect(groupAlive(pid)).toBe(true);

  // Back to an accepting server: the next start reconciles the job and the run completes.
  await docket.restart({});
  const second = home.listen();
  await second.waitFor((e) => e.event === 'resumed' && e.run_id === run.id);
  writeFileSync(go, 'go');
  const ended = await second.waitFor((e) => e.event === 'run_ended' && e.run_id === run.id, 60_000);
  expect(ended.outcome).toBe('completed');
  const done = await waitForRun(docket, org.admin, run.id, (r) => r.state === 'completed');
  expect(done.artifact).toMatchObject({ patch: '', source_revision: null }); // no repository: nothing to diff against
  expect(done.attempt).toBe(1);
  expect((await second.kill('SIGTERM')).code).toBe(0);
});
