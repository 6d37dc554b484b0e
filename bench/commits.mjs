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
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ADMIN_SECRET, claim, createOrg, dispatch, heartbeat, registerMachines } from './lib/docket.mjs';
import { client, pool, sleep } from './lib/http.mjs';
import { applyMigrations, ROOT, startWorker, stateDir, withLocalD1 } from './lib/local-worker.mjs';
import { HEAD_PRIORITY, HEAD_SET, RUNNER_LABELS, seedFloorHead } from './lib/seed.mjs';

const CLAIMS = Number(process.env.BENCH_COMMITS_CLAIMS ?? 40);
const IDLE_MS = Number(process.env.BENCH_COMMITS_IDLE_MS ?? 20_000);
const FLOOR_ORG = 'org_floor';
const say = (/** @type {string} */ line) => console.log(line);

if (spawnSync('strace', ['-V']).status !== 0) {
  console.error('bench:commits needs strace (apt-get install -y strace)');
  process.exit(1);
}

/** The pids of the workerd processes running now. */
function workerdPids() {
  return new Set(
    readdirSync('/proc').filter((d) => {
      try {
        return /^\d+$/.test(d) && readFileSync(`/proc/${d}/comm`, 'utf8').trim() === 'workerd';
      } catch {
        return false; // the process ended meanwhile
      }
    }),
  );
}

/**
 * The fsyncs of the workerd processes started since `others` while `work` runs, counted by what
 * they make durable. Answers the counts per unit of `work`'s answer (the claims granted).
 * @param {Set<string>} others @param {() => Promise<number>} work
 */
async function commitsDuring(others, work) {
  const pids = [...workerdPids()].filter((p) => !others.has(p));
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

/** Docket with `CLAIMS` queued runs and one runner; claims after `idleMs`. */
async function docketCommits(idleMs) {
  const state = stateDir('commits');
  let docket = null;
  try {
    const config = join(ROOT, 'wrangler.toml');
    applyMigrations(config, state.dir);
    const others = workerdPids();
    docket = await startWorker({ config, persist: state.dir, vars: { ADMIN_SECRET, LEASE_TTL_MS: '3600000', LAUNCH_DEADLINE_MS: '3600000' } });
    const api = client(docket.url);
    const org = await createOrg(api, 'bench-commits');
    const [machine] = await registerMachines(api, org.admin, 1, RUNNER_LABELS);
    await pool(CLAIMS, 4, () => dispatch(api, org.admin, { labels: RUNNER_LABELS, priority: HEAD_PRIORITY }));
    await heartbeat(api, machine.token, machine.protocols);
    await sleep(Math.max(1_500, idleMs)); // the dispatch events stored first
    return await commitsDuring(others, async () => {
      let granted = 0;
      for (let i = 0; i < CLAIMS; i++) if ((await claim(api, machine.token, 0)).status === 200) granted += 1;
      return granted;
    });
  } finally {
    await docket?.stop();
    state.remove();
  }
}

/** The floor Worker with `CLAIMS` rows at its head, claimed one at a time. */
async function floorCommits() {
  const state = stateDir('commits-floor');
  const config = join(ROOT, 'bench', 'floor', 'wrangler.toml');
  let floor = null;
  try {
    applyMigrations(config, state.dir);
    await withLocalD1({ config, persist: state.dir }, (db) => seedFloorHead(db, { orgId: FLOOR_ORG, round: 'commits', count: CLAIMS }));
    const others = workerdPids();
    floor = await startWorker({ config, persist: state.dir });
    const api = client(floor.url);
    await api.call('POST', '/claim', { body: { org_id: FLOOR_ORG, labels_key: 'none', machine_id: 'warm-up' } });
    return await commitsDuring(others, async () => {
      let granted = 0;
      for (let i = 0; i < CLAIMS; i++) if ((await api.call('POST', '/claim', { body: { org_id: FLOOR_ORG, labels_key: HEAD_SET, machine_id: 'm0' } })).status === 200) granted += 1;
      return granted;
    });
  } finally {
    await floor?.stop();
    state.remove();
  }
}

const show = (/** @type {string} */ who, /** @type {{ granted: number, perClaim: [string, number][] }} */ m) => {
  const total = m.perClaim.reduce((sum, [, n]) => sum + n, 0);
  say(`${who}: ${m.granted} of ${CLAIMS} claims granted; ${total.toFixed(2)} fsyncs per claim`);
  for (const [what, n] of m.perClaim) say(`  ${n.toFixed(2).padStart(5)}  ${what}`);
};

say(`Docket: ${CLAIMS} runs dispatched, claimed one at a time right after`);
show('Docket, run objects just dispatched', await docketCommits(0));
say(`Docket: ${CLAIMS} runs dispatched, claimed one at a time after ${IDLE_MS} ms idle`);
show(`Docket, run objects idle ${IDLE_MS / 1000} s`, await docketCommits(IDLE_MS));
show('the floor', await floorCommits());
