// Where a claim's CPU goes (docs/BENCHMARKS.md, "Where a claim's CPU goes"). Starts Docket locally
// as the benchmarks do, with its DevTools inspector, queues BENCH_PROFILE_CLAIMS runs and has 4
// runner machines claim them at once while the Worker's isolate is sampled. Prints the CPU time
// of the local workerd processes per claim and the functions that took most of the isolate's time,
// by their own time and with what they call, and writes the profile for Chrome DevTools.
//
//   npm run bench:profile   (BENCH_PROFILE_CLAIMS, default 400; BENCH_PROFILE_PORT, default 9339;
//                            BENCH_PROFILE_OUT, default docket-claims.cpuprofile in the temp directory)
//
// Sampling and the inspector slow the Worker down (console lines go to the inspector too), so the
// shares matter, not the times. Nothing here reaches the internet.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { ADMIN_SECRET, claim, createOrg, dispatch, heartbeat, registerMachines } from './lib/docket.mjs';
import { client, pool, sleep } from './lib/http.mjs';
import { applyMigrations, ROOT, startWorker, stateDir } from './lib/local-worker.mjs';
import { HEAD_PRIORITY, RUNNER_LABELS } from './lib/seed.mjs';

const CLAIMS = Number(process.env.BENCH_PROFILE_CLAIMS ?? 400);
const PORT = Number(process.env.BENCH_PROFILE_PORT ?? 9339);
const RUNNERS = 4;
const OUT = process.env.BENCH_PROFILE_OUT ?? join(tmpdir(), 'docket-claims.cpuprofile');
const say = (/** @type {string} */ line) => console.log(line);

const state = stateDir('profile');
let docket = null;
try {
  const config = join(ROOT, 'wrangler.toml');
  applyMigrations(config, state.dir);
  const before = workerdTimes();
  docket = await startWorker({ config, persist: state.dir, vars: { ADMIN_SECRET, LEASE_TTL_MS: '3600000', LAUNCH_DEADLINE_MS: '3600000' }, inspectorPort: PORT });
  const api = client(docket.url);
  const org = await createOrg(api, 'bench-profile');
  const machines = await registerMachines(api, org.admin, RUNNERS, RUNNER_LABELS);
  say(`queueing ${CLAIMS} runs`);
  await pool(CLAIMS, 4, () => dispatch(api, org.admin, { labels: RUNNER_LABELS, priority: HEAD_PRIORITY }));
  for (const m of machines) await heartbeat(api, m.token, m.protocols);
  await sleep(1_500); // the outbox consumer stores the dispatch events before the sampling starts

  const inspector = await connect(PORT);
  await inspector.send('Profiler.enable');
  await inspector.send('Profiler.setSamplingInterval', { interval: 500 });
  await inspector.send('Profiler.start');
  const cpuBefore = workerdTimes();
  const started = performance.now();
  let granted = 0;
  await pool(CLAIMS, RUNNERS, async (_i, lane) => {
    if ((await claim(api, machines[lane].token, 0)).status === 200) granted += 1;
  });
  const wallMs = performance.now() - started;
  const cpuAfter = workerdTimes();
  const { profile } = await inspector.send('Profiler.stop');
  inspector.close();
  writeFileSync(OUT, JSON.stringify(profile));

  say(`${granted} of ${CLAIMS} claims granted by ${RUNNERS} runners at once in ${(wallMs / 1000).toFixed(1)} s (${(CLAIMS / (wallMs / 1000)).toFixed(0)} claims/s while sampled)`);
  for (const [pid, ms] of cpuAfter) {
    if (before.has(pid)) continue;
    const used = ms - (cpuBefore.get(pid) ?? 0);
    if (used > 0) say(`  workerd process ${pid}: ${(used / CLAIMS).toFixed(2)} ms of CPU per claim`);
  }
  report(profile);
  say(`profile written to ${OUT} (open it in Chrome DevTools, Performance)`);
} finally {
  await docket?.stop();
  state.remove();
}

/** CPU time (user + system, ms) of every workerd process now, by pid. */
function workerdTimes() {
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

/** The Worker's inspector: one DevTools protocol session, answers matched to requests by id. */
async function connect(port) {
  const targets = await (await fetch(`http://127.0.0.1:${port}/json`)).json();
  const ws = new WebSocket(targets[0].webSocketDebuggerUrl);
  await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
  let nextId = 0;
  const waiting = new Map();
  ws.on('message', (data) => {
    const message = JSON.parse(String(data));
    waiting.get(message.id)?.(message.result);
    waiting.delete(message.id);
  });
  return {
    send: (/** @type {string} */ method, params = {}) =>
      new Promise((resolve) => {
        const id = ++nextId;
        waiting.set(id, resolve);
        ws.send(JSON.stringify({ id, method, params }));
      }),
    close: () => ws.close(),
  };
}

/** The functions with the largest shares of the sampled busy time: their own, and with their callees. */
function report(profile) {
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const sampled = new Map();
  profile.samples.forEach((id, i) => sampled.set(id, (sampled.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
  const name = (n) => `${n.callFrame.functionName || '(anonymous)'}${n.callFrame.url.startsWith('cloudflare-internal') ? ` [${n.callFrame.url}]` : ''}`;
  const own = new Map();
  const total = new Map();
  let busy = 0;
  for (const [id, us] of sampled) {
    const node = nodes.get(id);
    if (node.callFrame.functionName === '(idle)') continue;
    busy += us;
    own.set(name(node), (own.get(name(node)) ?? 0) + us);
    const seen = new Set();
    for (let at = id; at !== undefined; at = parent.get(at)) {
      const key = name(nodes.get(at));
      if (seen.has(key) || key === '(root)') continue;
      seen.add(key);
      total.set(key, (total.get(key) ?? 0) + us);
    }
  }
  const top = (/** @type {Map<string, number>} */ m, n) =>
    [...m].sort((a, b) => b[1] - a[1]).slice(0, n).map(([k, us]) => `  ${((100 * us) / busy).toFixed(1).padStart(5)}%  ${k}`);
  say(`the Worker's isolate was busy ${(busy / 1000).toFixed(0)} ms of the sampled time; by own time:`);
  top(own, 20).forEach(say);
  say('with what they call:');
  top(total, 30).forEach(say);
}
