// Docket and the floor Worker with runs queued at their heads, each on fresh local state, for the
// measurements that look inside the local workerd processes (bench/profile.mjs, bench/commits.mjs).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ADMIN_SECRET, createOrg, dispatch, heartbeat, registerMachines } from './docket.mjs';
import { client, pool, sleep } from './http.mjs';
import { applyMigrations, ROOT, startWorker, stateDir, withLocalD1 } from './local-worker.mjs';
import { HEAD_PRIORITY, RUNNER_LABELS, seedFloorHead } from './seed.mjs';

export const FLOOR_ORG = 'org_floor';

/**
 * Docket with `runs` queued runs and `runners` runner machines; `measure` runs `idleMs` (at least
 * 1.5 s, for the outbox consumer to store the dispatch events) after the last dispatch. `others`
 * are the workerd processes that were running before this Docket started.
 * @template T
 * @param {{ prefix: string, runs: number, runners: number, idleMs?: number, inspectorPort?: number }} opts
 * @param {(api: any, machines: any[], others: Set<string>) => Promise<T>} measure
 * @returns {Promise<T>}
 */
export async function withQueuedDocket({ prefix, runs, runners, idleMs = 0, inspectorPort }, measure) {
  const state = stateDir(prefix);
  let docket = null;
  try {
    const config = join(ROOT, 'wrangler.toml');
    applyMigrations(config, state.dir);
    const others = new Set(workerdTimes().keys());
    docket = await startWorker({ config, persist: state.dir, vars: { ADMIN_SECRET, LEASE_TTL_MS: '3600000', LAUNCH_DEADLINE_MS: '3600000' }, inspectorPort });
    const api = client(docket.url);
    const org = await createOrg(api, `bench-${prefix}`);
    const machines = await registerMachines(api, org.admin, runners, RUNNER_LABELS);
    console.log(`queueing ${runs} runs`);
    await pool(runs, 4, () => dispatch(api, org.admin, { labels: RUNNER_LABELS, priority: HEAD_PRIORITY }));
    for (const m of machines) await heartbeat(api, m.token, m.protocols);
    await sleep(Math.max(1_500, idleMs));
    return await measure(api, machines, others);
  } finally {
    await docket?.stop();
    state.remove();
  }
}

/**
 * The floor Worker with `rows` queued rows at its head (organization FLOOR_ORG); `others` as for
 * withQueuedDocket.
 * @template T
 * @param {{ prefix: string, rows: number }} opts
 * @param {(api: any, others: Set<string>) => Promise<T>} measure
 * @returns {Promise<T>}
 */
export async function withQueuedFloor({ prefix, rows }, measure) {
  const state = stateDir(prefix);
  const config = join(ROOT, 'bench', 'floor', 'wrangler.toml');
  let floor = null;
  try {
    applyMigrations(config, state.dir);
    await withLocalD1({ config, persist: state.dir }, (db) => seedFloorHead(db, { orgId: FLOOR_ORG, round: prefix, count: rows }));
    const others = new Set(workerdTimes().keys());
    floor = await startWorker({ config, persist: state.dir });
    return await measure(client(floor.url), others);
  } finally {
    await floor?.stop();
    state.remove();
  }
}

/** CPU time (user + system, ms) of every workerd process now, by pid. */
export function workerdTimes() {
  const times = new Map();
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) !== 'workerd') continue;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      times.set(pid, (Number(fields[11]) + Number(fields[12])) * 10); // clock ticks of 10 ms
    } catch {
      // the process ended meanwhile
    }
  }
  return times;
}

/**
 * `runners` lanes take `claims` claims at once; answers the grants, the wall time and the CPU per
 * claim of each workerd process but `others` (those that were running before the Worker started),
 * counted until a second after the last claim (the outbox consumer's share of the claims' events).
 * @param {{ claims: number, runners: number, others: Set<string>, claimOne: (lane: number) => Promise<{ status: number }> }} o
 */
export async function claimAtOnce({ claims, runners, others, claimOne }) {
  const before = workerdTimes();
  const started = performance.now();
  let granted = 0;
  await pool(claims, runners, async (_i, lane) => {
    if ((await claimOne(lane)).status === 200) granted += 1;
  });
  const wallMs = performance.now() - started;
  await sleep(1_000);
  const after = workerdTimes();
  /** @type {[string, number][]} */
  const perProcess = [...after].filter(([pid]) => !others.has(pid)).map(([pid, ms]) => /** @type {[string, number]} */ ([pid, (ms - (before.get(pid) ?? 0)) / claims])).filter(([, ms]) => ms > 0);
  return { granted, wallMs, claimsPerS: claims / (wallMs / 1000), perProcess, total: perProcess.reduce((sum, [, ms]) => sum + ms, 0) };
}
