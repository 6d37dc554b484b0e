// Claim cost against queue depth, beside the platform floor (docs/BENCHMARKS.md, "Method").
// For each depth: bulk rows are seeded straight into the stopped Worker's local D1, then Docket
// starts and 2 × `claims` real runs are dispatched at the head of the runner's queue. Two passes
// of `claims` claims take them: one claim at a time (latency), then `concurrency` runner machines
// at once (throughput). Every claim's Docket-Cost header gives its D1 rows and Durable Object
// requests. The floor Worker (bench/floor/) gets the same depth and the same two passes.
import { join } from 'node:path';
import { claim, createOrg, dispatch, heartbeat, parseCost, registerMachines } from './lib/docket.mjs';
import { client, pool, sleep } from './lib/http.mjs';
import { applyMigrations, ROOT, startWorker, stateDir, withLocalD1 } from './lib/local-worker.mjs';
import { countQueued, HEAD_PRIORITY, HEAD_SET, RUNNER_LABELS, seedBulk, seedFloorHead } from './lib/seed.mjs';
import { summarize } from './lib/stats.mjs';

const FLOOR_CONFIG = join(ROOT, 'bench', 'floor', 'wrangler.toml');
const FLOOR_ORG = 'org_floor';
const OUTSIDER = { labels: ['gpu'], protocols: ['docker'], claims: 20 };

/**
 * @param {string} docketConfig the wrangler.toml of the Docket to measure
 * @param {{ depths: number[], claims: number, concurrency: number, seedBatch: number, docketVars: Record<string, string> }} cfg
 * @param {(line: string) => void} say
 */
export async function claimCost(docketConfig, cfg, say) {
  const docketState = stateDir('docket');
  const floorState = stateDir('floor');
  /** @type {{ url: string, stop: () => Promise<void> } | null} */
  let running = null;
  const start = async (/** @type {string} */ config, /** @type {string} */ persist, vars = {}) => {
    running = await startWorker({ config, persist, vars });
    return running;
  };
  const stop = async () => {
    await running?.stop();
    running = null;
  };
  try {
    say('applying D1 migrations (Docket and the floor)');
    applyMigrations(docketConfig, docketState.dir);
    applyMigrations(FLOOR_CONFIG, floorState.dir);

    // An organization and its runner machines, made once; they live on in the persisted state.
    let docket = await start(docketConfig, docketState.dir, cfg.docketVars);
    const setup = client(docket.url);
    const org = await createOrg(setup, 'bench-claims');
    const machines = await registerMachines(setup, org.admin, cfg.concurrency, RUNNER_LABELS);
    // A runner that can serve none of the queued work: label gpu alone, protocol docker alone.
    const [outsider] = await registerMachines(setup, org.admin, 1, OUTSIDER.labels, OUTSIDER.protocols);
    await stop();

    const rows = [];
    let seeded = 0;
    for (const depth of cfg.depths) {
      const t0 = Date.now();
      const progress = (/** @type {string} */ who) => (/** @type {number} */ done) => {
        if (done === depth || (done - seeded) % (cfg.seedBatch * 5) === 0) say(`  ${who}: ${done.toLocaleString('en-US')} of ${depth.toLocaleString('en-US')} rows`);
      };
      say(`depth ${depth.toLocaleString('en-US')}: seeding ${(depth - seeded).toLocaleString('en-US')} more queued rows`);
      const docketQueued = await withLocalD1({ config: docketConfig, persist: docketState.dir }, async (db) => {
        await seedBulk(db, 'docket', { orgId: org.orgId, from: seeded, to: depth, batch: cfg.seedBatch, onProgress: progress('Docket') });
        return countQueued(db, 'docket', org.orgId);
      });
      const floorQueued = await withLocalD1({ config: FLOOR_CONFIG, persist: floorState.dir }, async (db) => {
        await seedBulk(db, 'floor', { orgId: FLOOR_ORG, from: seeded, to: depth, batch: cfg.seedBatch, onProgress: progress('floor') });
        await seedFloorHead(db, { orgId: FLOOR_ORG, round: String(depth), count: 2 * cfg.claims });
        return countQueued(db, 'floor', FLOOR_ORG);
      });
      // Earlier heads were all claimed: what is queued now is the bulk (and the floor's new head).
      if (docketQueued !== depth || floorQueued !== depth + 2 * cfg.claims) {
        throw new Error(`depth ${depth}: ${docketQueued} runs queued in Docket and ${floorQueued} in the floor after seeding`);
      }
      seeded = depth;
      const seedMs = Date.now() - t0;

      docket = await start(docketConfig, docketState.dir, cfg.docketVars);
      const api = client(docket.url);
      say(`  Docket: dispatching ${2 * cfg.claims} runs at the head; ${cfg.claims} claims one at a time, ${cfg.claims} by ${cfg.concurrency} runners at once`);
      /** @type {Map<string, number>} when each head run's dispatch answered (performance.now()) */
      const dispatchedAt = new Map();
      await pool(2 * cfg.claims, 4, async () => dispatchedAt.set(await dispatch(api, org.admin, { labels: RUNNER_LABELS, priority: HEAD_PRIORITY }), performance.now()));
      const heads = new Set(dispatchedAt.keys());
      // Runners heartbeat every 30 s, so a claim does not also move their last-seen time.
      for (const m of [...machines, outsider]) await heartbeat(api, m.token, m.protocols);
      await sleep(1_500); // let the outbox consumer store the dispatch events before measuring
      const docketRun = await measure(cfg, (lane) => claim(api, machines[lane].token, 0), parseCost, dispatchedAt);
      const outsiderClaims = [];
      for (let i = 0; i < OUTSIDER.claims; i++) {
        const res = await claim(api, outsider.token, 0, undefined, OUTSIDER.protocols);
        if (res.status !== 204) throw new Error(`depth ${depth}: a runner that serves none of the queue got HTTP ${res.status}`);
        outsiderClaims.push(parseCost(res.headers));
      }
      await stop();
      const claimed = docketRun.granted.map((s) => s.runId);
      const wrong = claimed.filter((id) => !heads.has(id));
      if (wrong.length > 0 || new Set(claimed).size !== claimed.length || claimed.length !== heads.size) {
        throw new Error(`depth ${depth}: the claims did not take exactly the ${heads.size} head runs once each (${claimed.length} granted, ${wrong.length} others)`);
      }

      const floor = await start(FLOOR_CONFIG, floorState.dir);
      const floorApi = client(floor.url);
      say(`  floor: the same two passes`);
      const floorRun = await measure(
        cfg,
        (lane) => floorApi.call('POST', '/claim', { body: { org_id: FLOOR_ORG, labels_key: HEAD_SET, machine_id: `m${lane}` } }),
        (headers) => parseCost(new Headers({ 'docket-cost': headers.get('floor-cost') ?? '' })),
      );
      await stop();
      if (floorRun.granted.length !== 2 * cfg.claims) throw new Error(`depth ${depth}: the floor granted ${floorRun.granted.length} of ${2 * cfg.claims} claims`);

      const outsiderCost = (/** @type {string} */ k) => summarize(outsiderClaims.map((c) => /** @type {any} */ (c)[k]));
      const row = {
        depth,
        queued_at_start: depth + 2 * cfg.claims,
        seed_ms: seedMs,
        docket: docketRun.summary,
        // Empty claims (204) by the runner that serves none of the queue: what unservable work costs it.
        unservable: { claims: OUTSIDER.claims, d1_rows_read: outsiderCost('d1_rows_read'), d1_rows_written: outsiderCost('d1_rows_written'), do_requests: outsiderCost('do_requests') },
        floor: floorRun.summary,
      };
      const d = docketRun.summary;
      const f = floorRun.summary;
      say(
        `  depth ${depth.toLocaleString('en-US')}: Docket per claim ${fmtCost(d.cost)}; p50 ${d.latency_ms.p50?.toFixed(1)} ms, ` +
          `${d.claims_per_s.toFixed(0)} claims/s (runs idle ${d.concurrent_idle_s.min?.toFixed(1)}–${d.concurrent_idle_s.max?.toFixed(1)} s); floor p50 ${f.latency_ms.p50?.toFixed(1)} ms, ${f.claims_per_s.toFixed(0)} claims/s`,
      );
      rows.push(row);
    }
    return {
      runner: { labels: RUNNER_LABELS, protocols: ['process'] },
      unservable_runner: { labels: OUTSIDER.labels, protocols: OUTSIDER.protocols },
      claims_per_depth: cfg.claims,
      concurrency: cfg.concurrency,
      rows,
    };
  } finally {
    await stop();
    docketState.remove();
    floorState.remove();
  }
}

/** @param {{ d1_rows_read: { mean: number }, d1_rows_written: { mean: number }, do_requests: { mean: number } }} c */
function fmtCost(c) {
  return `${c.d1_rows_read.mean.toFixed(1)} rows read, ${c.d1_rows_written.mean.toFixed(1)} written, ${c.do_requests.mean.toFixed(1)} DO requests`;
}

/**
 * Two passes of `cfg.claims` claims: one at a time (latency), then `cfg.concurrency` at once
 * (throughput, and latency under that load). Summarizes the granted claims of both.
 * @param {{ claims: number, concurrency: number }} cfg
 * @param {(lane: number) => Promise<{ status: number, body: any, headers: Headers, ms: number }>} one
 * @param {(headers: Headers) => Record<string, number> | null} costOf
 * @param {Map<string, number>} [dispatchedAt] when each run was dispatched: the summary then says how long the concurrent pass's runs had waited
 */
async function measure(cfg, one, costOf, dispatchedAt) {
  const pass = async (/** @type {number} */ concurrency) => {
    const started = performance.now();
    const samples = await pool(cfg.claims, concurrency, async (_i, lane) => {
      const sentAt = performance.now();
      const res = await one(lane);
      const cost = costOf(res.headers);
      if (!cost) throw new Error(`a claim answered without its cost header (HTTP ${res.status})`);
      return { status: res.status, ms: res.ms, cost, runId: res.body?.run_id ?? res.body?.id ?? null, sentAt };
    });
    return { samples, claimsPerS: samples.length / ((performance.now() - started) / 1000) };
  };
  const sequential = await pass(1);
  const concurrent = await pass(cfg.concurrency);
  const granted = [...sequential.samples, ...concurrent.samples].filter((s) => s.status === 200);
  const costSummary = (/** @type {string} */ k) => summarize(granted.map((s) => s.cost[k]));
  const latency = (/** @type {typeof sequential} */ p) => summarize(p.samples.filter((s) => s.status === 200).map((s) => s.ms));
  return {
    granted,
    summary: {
      claims: 2 * cfg.claims,
      granted: granted.length,
      cost: { d1_rows_read: costSummary('d1_rows_read'), d1_rows_written: costSummary('d1_rows_written'), do_requests: costSummary('do_requests') },
      latency_ms: latency(sequential),
      concurrent_latency_ms: latency(concurrent),
      claims_per_s: concurrent.claimsPerS,
      // How long the concurrent pass's runs had waited since their dispatch answered: local workerd
      // closes a Durable Object about 10 s after its last call, and a claim opens a closed one again.
      ...(dispatchedAt && {
        concurrent_idle_s: summarize(
          concurrent.samples.filter((s) => s.status === 200 && dispatchedAt.has(s.runId)).map((s) => (s.sentAt - /** @type {number} */ (dispatchedAt.get(s.runId))) / 1000),
        ),
      }),
    },
  };
}
