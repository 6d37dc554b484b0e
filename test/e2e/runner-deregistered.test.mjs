// An admin deregisters a listening runner's machine: the runner's next call is refused with 401
// machine_deregistered, and it says how to register again and exits 6 instead of backing off forever.
import { afterAll, expect, it } from 'vitest';
import { runnerSuite } from './helpers.mjs';

const { home, start } = runnerSuite(afterAll);

it('a runner whose machine an admin deregistered exits 6 with how to register again, and a new registration works', async () => {
  const { docket, org } = await start();
  const listener = home.listen();
  await listener.waitFor('started');
  const [machine] = (await docket.api('GET', '/v1/runners', { token: org.admin })).body.runners;

  const gone = await docket.api('DELETE', `/v1/runners/${machine.id}`, { token: org.admin });
  expect(gone.status).toBe(200);
  expect((await docket.api('GET', '/v1/runners', { token: org.admin })).body.runners).toEqual([]);

  const exit = await listener.exited;
  expect(exit.code).toBe(6);
  const said = listener.events.find((e) => e.event === 'deregistered');
  expect(said.machine_id).toBe(machine.id);
  expect(said.message).toContain('docket-runner register');

  // With a new registration token the machine comes back under a new id.
  const token = (await docket.api('POST', '/v1/tokens', { token: org.admin, body: { kind: 'registration', max_uses: 1 } })).body.token;
  expect(home.run(['register', '--server', docket.url, '--token', token]).code).toBe(0);
  const [again] = (await docket.api('GET', '/v1/runners', { token: org.admin })).body.runners;
  expect(again.id).not.toBe(machine.id);
});
