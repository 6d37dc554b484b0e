// Where a claim's CPU goes (docs/BENCHMARKS.md, "Where a claim's CPU goes"). First the CPU time of
// the local workerd processes per claim while 4 runner machines take BENCH_PROFILE_CLAIMS queued
// runs at once, for Docket and for the floor Worker (bench/floor/), unsampled; then Docket again
// with its DevTools inspector, the Worker's isolate sampled: the functions that took most of its
// time, by their own time and with what they call, and the profile for Chrome DevTools.
//
//   npm run bench:profile   (BENCH_PROFILE_CLAIMS, default 400; BENCH_PROFILE_PORT, default 9339;
//                            BENCH_PROFILE_OUT, default docket-claims.cpuprofile in the temp directory;
//                            BENCH_PROFILE_IDLE_MS, default 1500: how long the queued runs wait
//                            before the claims; from about 10 s local workerd has closed their
//                            run objects, and each claim opens one again)
//
// Sampling and the inspector slow the Worker down (console lines go to the inspector too), so the
// shares matter, not the times. Nothing here reaches the internet.
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { claim } from './lib/docket.mjs';
import { claimAtOnce, FLOOR_ORG, withQueuedDocket, withQueuedFloor } from './lib/queued.mjs';
import { HEAD_SET } from './lib/seed.mjs';
import { helpOrRefuse, openingComment } from '../scripts/cli-args.mjs';

helpOrRefuse('npm run bench:profile', () => openingComment(import.meta.url));

const CLAIMS = Number(process.env.BENCH_PROFILE_CLAIMS ?? 400);
const PORT = Number(process.env.BENCH_PROFILE_PORT ?? 9339);
const RUNNERS = 4;
const OUT = process.env.BENCH_PROFILE_OUT ?? join(tmpdir(), 'docket-claims.cpuprofile');
const IDLE_MS = Number(process.env.BENCH_PROFILE_IDLE_MS ?? 1_500);
const say = (/** @type {string} */ line) => console.log(line);

/** 4 runners take `CLAIMS` claims at once (bench/lib/queued.mjs, claimAtOnce). */
const claimAll = (/** @type {Set<string>} */ others, /** @type {(lane: number) => Promise<{ status: number }>} */ claimOne) =>
  claimAtOnce({ claims: CLAIMS, runners: RUNNERS, others, claimOne });

const show = (/** @type {string} */ who, /** @type {Awaited<ReturnType<typeof claimAll>>} */ m) => {
  say(`${who}: ${m.granted} of ${CLAIMS} claims granted by ${RUNNERS} runners at once, ${m.claimsPerS.toFixed(0)} claims/s; workerd CPU per claim ${m.total.toFixed(2)} ms`);
  for (const [pid, ms] of m.perProcess) say(`  workerd process ${pid}: ${ms.toFixed(2)} ms`);
};

const docketCpu = await withQueuedDocket({ prefix: 'profile', runs: CLAIMS, runners: RUNNERS, idleMs: IDLE_MS }, (api, machines, others) => claimAll(others, (lane) => claim(api, machines[lane].token, 0)));
show('Docket, unsampled', docketCpu);
const floorCpu = await withQueuedFloor({ prefix: 'profile-floor', rows: CLAIMS }, (api, others) =>
  claimAll(others, (lane) => api.call('POST', '/claim', { body: { org_id: FLOOR_ORG, labels_key: HEAD_SET, machine_id: `m${lane}` } })),
);
show('the floor', floorCpu);
say(`the floor's CPU per claim is ${(floorCpu.total / docketCpu.total).toFixed(2)} of Docket's`);

await withQueuedDocket({ prefix: 'profile', runs: CLAIMS, runners: RUNNERS, idleMs: IDLE_MS, inspectorPort: PORT }, async (api, machines, others) => {
  const inspector = await connect(PORT);
  await inspector.send('Profiler.enable');
  await inspector.send('Profiler.setSamplingInterval', { interval: 500 });
  await inspector.send('Profiler.start');
  const sampled = await claimAll(others, (lane) => claim(api, machines[lane].token, 0));
  const { profile } = await inspector.send('Profiler.stop');
  inspector.close();
  writeFileSync(OUT, JSON.stringify(profile));
  show('Docket, sampled', sampled);
  report(profile);
  say(`profile written to ${OUT} (open it in Chrome DevTools, Performance)`);
});

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
