// Durable commits per claim (docs/BENCHMARKS.md, "Durable commits per claim"): every fsync the
// local runtime makes while one runner takes BENCH_COMMITS_CLAIMS queued runs one at a time, by the
// file it makes durable, for Docket (its run objects just dispatched, then idle long enough for the
// local runtime to close them) and for the floor Worker (bench/floor/). Local workerd makes every
// commit durable on its one thread, so on a disk each one is time no claim runs.
//
//   npm run bench:commits   (BENCH_COMMITS_CLAIMS, default 40; BENCH_COMMITS_IDLE_MS, default 20000)
//
// It attaches strace (Debian's `strace` package) to the local workerd processes it starts, for the
// claims only. Nothing here reaches the internet.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { claim } from './lib/docket.mjs';
import { sleep } from './lib/http.mjs';
import { FLOOR_ORG, withQueuedDocket, withQueuedFloor, workerdTimes } from './lib/queued.mjs';
import { HEAD_SET } from './lib/seed.mjs';
import { helpOrRefuse, openingComment } from '../scripts/cli-args.mjs';

helpOrRefuse('npm run bench:commits', () => openingComment(import.meta.url));

const CLAIMS = Number(process.env.BENCH_COMMITS_CLAIMS ?? 40);
const IDLE_MS = Number(process.env.BENCH_COMMITS_IDLE_MS ?? 20_000);
const say = (/** @type {string} */ line) => console.log(line);

if (spawnSync('strace', ['-V']).status !== 0) {
  console.error('bench:commits needs strace (apt-get install -y strace)');
  process.exit(1);
}

/**
 * The fsyncs of the workerd processes started since `others` while `work` runs, counted by what
 * they make durable. Answers the counts per unit of `work`'s answer (the claims granted).
 * @param {Set<string>} others @param {() => Promise<number>} work
 */
async function commitsDuring(others, work) {
  const pids = [...workerdTimes().keys()].filter((p) => !others.has(p));
  const dir = mkdtempSync(join(tmpdir(), 'docket-bench-strace-'));
  const file = join(dir, 'fsyncs.txt');
  try {
    const tracer = spawn('strace', ['-f', '-qq', '-y', '-e', 'trace=fsync,fdatasync', '-o', file, ...pids.flatMap((p) => ['-p', p])], { stdio: ['ignore', 'ignore', 'pipe'] });
    let failure = '';
    tracer.stderr.on('data', (chunk) => (failure += chunk));
    const exited = new Promise((resolve) => tracer.once('exit', resolve));
    await sleep(1_000); // attached
    if (tracer.exitCode !== null) throw new Error(`strace could not attach to workerd: ${failure.trim()}`);
    const granted = await work();
    await sleep(1_500); // the outbox consumer's share of the claims' events
    tracer.kill('SIGINT');
    await exited;
    return tally(readFileSync(file, 'utf8'), granted);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The fsyncs of an strace log by what they make durable, per claim granted. */
function tally(out, granted) {
  const counts = new Map();
  for (const [, path] of out.matchAll(/f(?:data)?sync\(\d+<([^>]*)>/g)) {
    const what = classify(path);
    counts.set(what, (counts.get(what) ?? 0) + 1);
  }
  return { granted, perClaim: [...counts].map(([what, n]) => [what, n / granted]).sort((a, b) => b[1] - a[1]) };
}

/** What a synced file is: a Durable Object class's storage, its alarms, its directory, or D1. */
function classify(path) {
  const d1 = path.includes('/d1/');
  const match = /\/do\/[^/]*?-([A-Za-z]+)(\/.*)?$/.exec(path);
  if (d1) return "D1 (the local simulator syncs once per query or batch, reads included)";
  if (!match) return path;
  const [, cls, file = ''] = match;
  if (file === '') return `${cls}: its directory (a closed object's files made again)`;
  if (file.startsWith('/metadata.sqlite')) return `${cls}: alarms`;
  if (file.endsWith('.sqlite')) return `${cls}: its storage, checkpointed when closed`;
  return `${cls}: its storage`;
}

/** One runner takes `CLAIMS` runs queued in Docket, one at a time, `idleMs` after they were dispatched. */
function docketCommits(idleMs) {
  return withQueuedDocket({ prefix: 'commits', runs: CLAIMS, runners: 1, idleMs }, (api, [machine], others) =>
    commitsDuring(others, async () => {
      let granted = 0;
      for (let i = 0; i < CLAIMS; i++) if ((await claim(api, machine.token, 0)).status === 200) granted += 1;
      return granted;
    }),
  );
}

/** The floor Worker's `CLAIMS` queued rows, claimed one at a time after one claim that warms it up. */
function floorCommits() {
  return withQueuedFloor({ prefix: 'commits-floor', rows: CLAIMS }, async (api, others) => {
    const claimOne = (labelsKey, machineId) => api.call('POST', '/claim', { body: { org_id: FLOOR_ORG, labels_key: labelsKey, machine_id: machineId } });
    await claimOne('none', 'warm-up');
    return commitsDuring(others, async () => {
      let granted = 0;
      for (let i = 0; i < CLAIMS; i++) if ((await claimOne(HEAD_SET, 'm0')).status === 200) granted += 1;
      return granted;
    });
  });
}

const show = (/** @type {string} */ who, /** @type {{ granted: number, perClaim: [string, number][] }} */ m) => {
  const total = m.perClaim.reduce((sum, [, n]) => sum + n, 0);
  say(`${who}: ${m.granted} of ${CLAIMS} claims granted; ${total.toFixed(2)} fsyncs per claim`);
  for (const [what, n] of m.perClaim) say(`  ${n.toFixed(2).padStart(5)}  ${what}`);
};

show('Docket, run objects just dispatched', await docketCommits(0));
show(`Docket, run objects idle ${IDLE_MS / 1000} s`, await docketCommits(IDLE_MS));
show('the floor', await floorCommits());
