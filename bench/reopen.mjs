// What a claim of a closed run object costs, and how much of it is the runtime's (docs/BENCHMARKS.md,
// "Opening a run object"). Local workerd closes a Durable Object about 10 s after its last call; a
// claim of a run queued longer opens its object again. For Docket and for a trivial run object
// (bench/reopen/: one SQLite row, a compare-and-swap), 4 runners take BENCH_REOPEN_CLAIMS queued
// runs at once, 1.5 s after the last dispatch (objects open) and BENCH_REOPEN_IDLE_MS after it
// (closed), in BENCH_REOPEN_PASSES turns; each pass prints claims per second and the workerd CPU per
// claim. This machine's spread from pass to pass is large, so the table at the end has the medians
// (nearest-rank p50).
//
//   npm run bench:reopen   (BENCH_REOPEN_CLAIMS, default 400; BENCH_REOPEN_IDLE_MS, default 20000;
//                           BENCH_REOPEN_PASSES, default 3)
//
// Nothing here reaches the internet.
import { join } from 'node:path';
import { claim } from './lib/docket.mjs';
import { client, pool, sleep } from './lib/http.mjs';
import { ROOT, startWorker, stateDir } from './lib/local-worker.mjs';
import { claimAtOnce, withQueuedDocket, workerdTimes } from './lib/queued.mjs';
import { summarize } from './lib/stats.mjs';
import { helpOrRefuse, openingComment } from '../scripts/cli-args.mjs';

helpOrRefuse('npm run bench:reopen', () => openingComment(import.meta.url));

const CLAIMS = Number(process.env.BENCH_REOPEN_CLAIMS ?? 400);
const IDLE_MS = Number(process.env.BENCH_REOPEN_IDLE_MS ?? 20_000);
const OPEN_MS = 1_500;
const PASSES = Number(process.env.BENCH_REOPEN_PASSES ?? 3);
const RUNNERS = 4;
for (const [name, value] of [['BENCH_REOPEN_CLAIMS', CLAIMS], ['BENCH_REOPEN_IDLE_MS', IDLE_MS], ['BENCH_REOPEN_PASSES', PASSES]]) {
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a whole number above 0, got ${JSON.stringify(process.env[name])}`);
}
const TRIVIAL = join(ROOT, 'bench', 'reopen', 'wrangler.toml');

/** The trivial run objects: `CLAIMS` of them made, then claimed at once `idleMs` later. */
async function trivial(/** @type {number} */ idleMs) {
  const state = stateDir('reopen');
  const others = new Set(workerdTimes().keys());
  const worker = await startWorker({ config: TRIVIAL, persist: state.dir });
  try {
    const api = client(worker.url);
    await pool(CLAIMS, RUNNERS, (i) => api.call('POST', `/create?id=r${i}`));
    await sleep(idleMs);
    let next = 0;
    return await claimAtOnce({ claims: CLAIMS, runners: RUNNERS, others, claimOne: () => api.call('POST', `/claim?id=r${next++}`) });
  } finally {
    await worker.stop();
    state.remove();
  }
}

/** Docket's run objects: `CLAIMS` runs dispatched, then claimed at once by 4 runners `idleMs` later. */
function docket(/** @type {number} */ idleMs) {
  return withQueuedDocket({ prefix: 'reopen', runs: CLAIMS, runners: RUNNERS, idleMs }, (api, machines, others) =>
    claimAtOnce({ claims: CLAIMS, runners: RUNNERS, others, claimOne: (lane) => claim(api, machines[lane].token, 0) }),
  );
}

const rows = [];
for (const [who, measure] of /** @type {const} */ ([['trivial run object', trivial], ['Docket', docket]])) {
  /** @type {Record<'open' | 'closed', { claimsPerS: number, cpuMs: number }[]>} */
  const passes = { open: [], closed: [] };
  for (let turn = 1; turn <= PASSES; turn++) {
    for (const [objects, idleMs] of /** @type {const} */ ([['open', OPEN_MS], ['closed', IDLE_MS]])) {
      const m = await measure(idleMs);
      if (m.granted !== CLAIMS) throw new Error(`${who}: ${m.granted} of ${CLAIMS} claims granted`);
      passes[objects].push({ claimsPerS: m.claimsPerS, cpuMs: m.total });
      console.log(`${who}, pass ${turn} of ${PASSES}, objects ${objects} (claims ${idleMs / 1000} s after the last dispatch): ${m.claimsPerS.toFixed(0)} claims/s, workerd CPU ${m.total.toFixed(2)} ms per claim`);
    }
  }
  const rate = (/** @type {'open' | 'closed'} */ k) => /** @type {number} */ (summarize(passes[k].map((p) => p.claimsPerS)).p50);
  const cpu = (/** @type {'open' | 'closed'} */ k) => /** @type {number} */ (summarize(passes[k].map((p) => p.cpuMs)).p50);
  rows.push(`| ${who} | ${rate('open').toFixed(0)} | ${rate('closed').toFixed(0)} | ${cpu('open').toFixed(2)} ms | ${cpu('closed').toFixed(2)} ms | ${(cpu('closed') - cpu('open')).toFixed(2)} ms |`);
}
console.log(`
Medians of ${PASSES} passes of ${CLAIMS} claims by ${RUNNERS} runners:

| run object | claims/s, objects open | claims/s, closed | workerd CPU per claim, open | closed | opening costs |
| --- | --- | --- | --- | --- | --- |
${rows.join('\n')}`);

