// npm run bench: Docket's benchmarks against local Workers on 127.0.0.1 (docs/BENCHMARKS.md).
// Sections: claim cost against queue depth beside the platform floor, dispatch-to-claim latency,
// lifecycle throughput, claims across organizations, idle cost and the autopilot's GitHub requests.
// Results go to bench/results/ as JSON and markdown.
// Settings are environment variables (bench/lib/config.mjs); BENCH_QUICK=1 is a short run.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { autopilotBudget } from './autopilot.mjs';
import { cancelLatency } from './cancel.mjs';
import { writeCharts } from './charts.mjs';
import { claimCost } from './claim-cost.mjs';
import { idleCost } from './idle.mjs';
import { dispatchToClaim } from './latency.mjs';
import { lifecycle } from './lifecycle.mjs';
import { scale } from './scale.mjs';
import { limitRunTime } from './lib/cleanup.mjs';
import { readConfig } from './lib/config.mjs';
import { ADMIN_SECRET } from './lib/docket.mjs';
import { AUTOPILOT_VARS } from './lib/github-project.mjs';
import { applyMigrations, ROOT, SCRATCH, snapshotDocket, startWorker, stateDir } from './lib/local-worker.mjs';
import { resultsPage, resultTables, runLine } from './lib/report.mjs';
import { docTable, helpOrRefuse } from '../scripts/cli-args.mjs';

helpOrRefuse('npm run bench', () => `npm run bench: Docket's benchmarks against local Workers on 127.0.0.1 (docs/BENCHMARKS.md).
Sections: claims (claim cost against queue depth, beside the platform floor), latency
(dispatch-to-claim), lifecycle (runs per second), scale (organizations claiming at once), cancel
(cancel to sandbox stopped), idle (an idle runner's requests and memory), autopilot (GitHub requests
of autopilot projects, against a local GitHub stand-in). Nothing reaches the internet.

  npm run bench                     the full run, about 8 minutes on 2 cores
  BENCH_QUICK=1 npm run bench       a short look, about 1.5 minutes
  BENCH_SECTIONS=cancel npm run bench
  BENCH_SECTIONS=autopilot npm run bench   the autopilot section alone, results in autopilot.*
  BENCH_UPDATE_DOCS=1 npm run bench also replaces "Latest results" in docs/BENCHMARKS.md
                                    (with BENCH_SECTIONS=autopilot, its autopilot figures)

A full run with the defaults writes bench/results/latest.json and latest.md (quick.* for a quick
run, custom.* with other settings). Settings, all environment variables (default, quick default):

${docTable('docs/BENCHMARKS.md', '## Settings')}

Also: npm run bench:profile, bench:commits, bench:reopen (each -- --help).`);

const cfg = readConfig();
limitRunTime(cfg.timeoutMs);
const startedAt = Date.now();
const loadAtStart = loadavg()[0];
const git = gitState();
const docketConfig = snapshotDocket(cfg.source);
const say = (/** @type {string} */ line) => console.log(`[${((Date.now() - startedAt) / 1000).toFixed(1).padStart(6)} s] ${line}`);

/**
 * Docket's variables for the benchmark: its defaults, except that a run claimed and never launched
 * keeps its claim for the whole benchmark (a launch deadline or lease of an hour), so no run comes
 * back to the queue in the middle of a measurement.
 */
const DOCKET_VARS = { ADMIN_SECRET, LEASE_TTL_MS: '3600000', LAUNCH_DEADLINE_MS: '3600000' };

/** @type {Record<string, any>} */
const sections = {};
say(`Docket benchmarks${cfg.quick ? ' (quick)' : ''}: ${cfg.sections.join(', ')}; Docket ${git.commit}${cfg.source === 'head' ? ' as committed' : git.dirty ? ' with the uncommitted changes of the working tree' : ''}`);

if (cfg.sections.includes('claims')) {
  say(`claim cost against queue depth (${cfg.claims.depths.map((d) => d.toLocaleString('en-US')).join(', ')}) and the platform floor`);
  sections.claims = await againOnRestart(() => claimCost(docketConfig, { ...cfg.claims, docketVars: DOCKET_VARS }, say));
}

/**
 * Measures a section, and once more, afresh, when the local runtime restarted under one of its
 * requests: wrangler's proxy then answers 503 "restarted mid-request", a fault of the local tooling,
 * not an answer of Docket's. Each section cleans up its own state either way.
 * @template T
 * @param {() => Promise<T>} measure
 * @returns {Promise<T>}
 */
async function againOnRestart(measure) {
  try {
    return await measure();
  } catch (err) {
    if (!String(err).includes('restarted mid-request')) throw err;
    say(`  the local runtime restarted in the middle of a request; measuring the section again, afresh`);
    return measure();
  }
}

/**
 * Runs one live section against a Docket of its own (fresh local state, its Worker stopped after):
 * local workerd keeps every Durable Object a section touched in memory, and a section after a few
 * thousand runs would measure that instead of itself.
 * @template T
 * @param {Record<string, string>} vars
 * @param {(url: string) => Promise<T>} measure
 * @param {{ testScheduled?: boolean }} [o] with testScheduled, the cron tick runs on GET /__scheduled
 * @returns {Promise<T>}
 */
function withDocket(vars, measure, { testScheduled = false } = {}) {
  return againOnRestart(() => withDocketOnce(vars, measure, testScheduled));
}

/**
 * @template T
 * @param {Record<string, string>} vars
 * @param {(url: string) => Promise<T>} measure
 * @param {boolean} [testScheduled]
 * @returns {Promise<T>}
 */
async function withDocketOnce(vars, measure, testScheduled = false) {
  const state = stateDir('docket-live');
  /** @type {{ url: string, stop: () => Promise<void> } | null} */
  let docket = null;
  try {
    applyMigrations(docketConfig, state.dir);
    docket = await startWorker({ config: docketConfig, persist: state.dir, vars, testScheduled });
    return await measure(docket.url);
  } finally {
    await docket?.stop();
    state.remove();
  }
}

if (cfg.sections.includes('latency')) {
  say(`dispatch-to-claim latency: ${cfg.latency.waitingRunners} runners waiting on the long-poll beside one polling every ${cfg.latency.pollIntervalMs} ms`);
  sections.latency = await withDocket(DOCKET_VARS, (url) => dispatchToClaim(url, cfg.latency, say));
}
if (cfg.sections.includes('lifecycle')) {
  say(`lifecycle throughput: ${cfg.lifecycle.runs} runs with ${cfg.lifecycle.runnerCounts.join(', ')} runners`);
  sections.lifecycle = await withDocket(DOCKET_VARS, (url) => lifecycle(url, cfg.lifecycle, say));
}
if (cfg.sections.includes('scale')) {
  say(`claims across organizations: ${cfg.scale.orgCounts.join(", ")} organizations sharing ${cfg.scale.runners} runners and ${cfg.scale.runs} runs`);
  sections.scale = await withDocket(DOCKET_VARS, (url) => scale(url, cfg.scale, say));
}
if (cfg.sections.includes('cancel')) {
  say(`cancel latency: ${cfg.cancel.samples} runs of the runner CLI cancelled while running`);
  sections.cancel = await withDocket(DOCKET_VARS, (url) => cancelLatency(url, cfg.cancel, say));
}
if (cfg.sections.includes('idle')) {
  say(`idle cost: claim wait ${cfg.idle.claimWaitMs} ms, heartbeat every ${cfg.idle.heartbeatIntervalMs} ms`);
  const vars = { ...DOCKET_VARS, CLAIM_WAIT_MS: String(cfg.idle.claimWaitMs), HEARTBEAT_INTERVAL_MS: String(cfg.idle.heartbeatIntervalMs) };
  sections.idle = await withDocket(vars, (url) => idleCost(url, cfg.idle, say));
  say(`  ${sections.idle.requests_per_min.toFixed(1)} requests per idle runner per minute (expected ${sections.idle.expected_per_min.toFixed(1)}); at the defaults ${sections.idle.defaults.requests_per_min.toFixed(1)}`);
}

if (cfg.sections.includes('autopilot')) {
  say(`autopilot within GitHub's budget: an idle project at ${cfg.autopilot.readyIssues.map((n) => n.toLocaleString('en-US')).join(', ')} ready issues, the webhook door, a burst, publication`);
  // Its cron ticks are run by hand, GET /__scheduled.
  const withTicks = (/** @type {Record<string, string>} */ vars, /** @type {(url: string) => Promise<any>} */ measure) => withDocket(vars, measure, { testScheduled: true });
  sections.autopilot = await autopilotBudget(withTicks, { ...DOCKET_VARS, ...AUTOPILOT_VARS }, cfg.autopilot, say);
}

const results = {
  finished_at: new Date().toISOString(),
  duration_s: (Date.now() - startedAt) / 1000,
  quick: cfg.quick,
  machine: {
    cpus: cpus().length,
    cpu_model: cpus()[0]?.model?.trim() ?? 'unknown',
    node: process.versions.node,
    wrangler: wranglerVersion(),
    platform: process.platform,
    // Other work on the machine skews latency and throughput (not the D1 and request counts).
    load_average_1min: { at_start: loadAtStart, at_end: loadavg()[0] },
    // Every local commit is an fsync on disk and none in memory: it moves Docket's rate more than the floor's.
    local_state: { dir: SCRATCH.dir, in_memory: SCRATCH.inMemory },
  },
  git,
  config: cfg,
  sections,
};

const outDir = cfg.out || join(ROOT, 'bench', 'results');
const name = cfg.name;
mkdirSync(outDir, { recursive: true });
/** @type {any} */ (results).charts = writeCharts(results, outDir, name);
writeFileSync(join(outDir, `${name}.json`), `${JSON.stringify(results, null, 2)}\n`);
writeFileSync(join(outDir, `${name}.md`), resultsPage(results));
/** The block of docs/BENCHMARKS.md each run with the default settings fills (BENCH_UPDATE_DOCS=1). */
const DOC_BLOCKS = /** @type {Record<string, string>} */ ({ latest: 'latest results', autopilot: 'autopilot figures' });
if (cfg.updateDocs && DOC_BLOCKS[name]) updateDocs(results, DOC_BLOCKS[name]);
else if (cfg.updateDocs) say(`docs/BENCHMARKS.md not updated: it shows runs with the default settings, this is a ${name} run`);
console.log(`\n${resultTables(results)}\n`);
say(`results written to ${join(outDir, `${name}.md`)} and ${name}.json`);

function wranglerVersion() {
  return JSON.parse(readFileSync(join(ROOT, 'node_modules', 'wrangler', 'package.json'), 'utf8')).version;
}

/** The commit measured, and whether the measured source had uncommitted changes. */
function gitState() {
  const run = (/** @type {string[]} */ args) => spawnSync('git', args, { cwd: ROOT, encoding: 'utf8' }).stdout?.trim() ?? '';
  const changed = run(['status', '--porcelain', '--', 'src', 'durable-objects', 'migrations', 'wrangler.toml', 'package.json', 'tsconfig.json']) !== '';
  return { commit: run(['rev-parse', '--short', 'HEAD']) || 'unknown', source: cfg.source, dirty: cfg.source === 'worktree' && changed };
}

/** Replaces a block of docs/BENCHMARKS.md (BENCH_UPDATE_DOCS=1) with the run's tables. @param {any} r @param {string} block */
function updateDocs(r, block) {
  const path = join(ROOT, 'docs', 'BENCHMARKS.md');
  const begin = `<!-- ${block}: begin -->`;
  const end = `<!-- ${block}: end -->`;
  const doc = readFileSync(path, 'utf8');
  const from = doc.indexOf(begin);
  const to = doc.indexOf(end);
  if (from < 0 || to < from) throw new Error(`docs/BENCHMARKS.md has no ${begin} … ${end} block`);
  const text = `${begin}\n\n${runLine(r)}\n\n${resultTables(r, '../bench/results/')}\n\n${end}`;
  writeFileSync(path, doc.slice(0, from) + text + doc.slice(to + end.length));
  say('docs/BENCHMARKS.md updated');
}
