// The whole plane survives kill -9 (test/e2e/restart-harness.mjs): a small lifecycle load of runs
// and a paid build with real runners, the local Worker killed with SIGKILL and restarted on the
// same state three times (at a random moment, just after a dispatch commits, just after a claim
// commits). Every run must end exactly once, no attempt may run twice, no run may be left with
// nothing to move it on, and the ledger must balance. The long version: `npm run test:restart`.
import { expect, it } from 'vitest';
import { runChaos } from './restart-harness.mjs';

const seed = Number(process.env.RESTART_SEED ?? Math.floor(Math.random() * 2 ** 31));

it('kill -9 of the Worker at random moments and just after a dispatch or claim commits: every run ends once, no attempt runs twice, the ledger balances', async () => {
  console.log(`restart test seed ${seed} (replay: RESTART_SEED=${seed})`);
  const result = await runChaos({ seed, runs: 6, builds: 1, kills: 3, runners: 2, concurrency: 2, settleMs: 30_000, paceMs: [150, 500], calmMs: [500, 2_000], log: (m) => console.log(`[restart] ${m}`) });
  console.log(`[restart] ${JSON.stringify({ elapsed_ms: result.elapsed_ms, phases: result.phases, states: result.states })}`);
  expect(result.kills.map((k) => k.kind).sort()).toEqual(['after-claim', 'after-dispatch', 'random']);
  expect(result.findings, `seed ${seed}: ${JSON.stringify(result.findings, null, 2)}`).toEqual([]);
  expect(result.states).toEqual({ completed: result.runs });
}, 240_000);
