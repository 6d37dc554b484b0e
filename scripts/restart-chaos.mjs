#!/usr/bin/env node
// `npm run test:restart`: the long whole-plane restart test (test/e2e/restart-harness.mjs). A local
// Worker in its own process group under a lifecycle load of runs and paid builds with real runners,
// killed with SIGKILL and restarted on the same state; then every invariant is checked. Knobs are
// environment variables; the seed is printed, and RESTART_SEED=<seed> replays the same plan (the
// same kills, pauses and load; the machine decides the exact interleaving).
import { writeFileSync } from 'node:fs';
import { runChaos } from '../test/e2e/restart-harness.mjs';
import { docTable, helpOrRefuse, openingComment } from './cli-args.mjs';

helpOrRefuse('npm run test:restart', () => `${openingComment(import.meta.url)}

Settings (docs/BENCHMARKS.md, "Restart test: the whole plane under kill -9"):

${docTable('docs/BENCHMARKS.md', '## Restart test: the whole plane under kill -9')}`);

process.env.WRANGLER_SEND_METRICS ??= 'false';
process.env.CLOUDFLARE_CF_FETCH_ENABLED ??= 'false';

const num = (/** @type {string} */ name, /** @type {number} */ dflt) => {
  const v = process.env[name];
  if (v === undefined || v === '') return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a whole number, got ${v}`);
  return n;
};

const options = {
  seed: num('RESTART_SEED', Math.floor(Math.random() * 2 ** 31)),
  runs: num('RESTART_RUNS', 60),
  builds: num('RESTART_BUILDS', 6),
  kills: num('RESTART_KILLS', 9),
  runners: num('RESTART_RUNNERS', 3),
  concurrency: num('RESTART_CONCURRENCY', 2),
  settleMs: num('RESTART_SETTLE_MS', 90_000),
  paceMs: /** @type {[number, number]} */ ([num('RESTART_PACE_MIN_MS', 100), num('RESTART_PACE_MAX_MS', 600)]),
  calmMs: /** @type {[number, number]} */ ([num('RESTART_CALM_MIN_MS', 1_000), num('RESTART_CALM_MAX_MS', 6_000)]),
  keep: process.env.RESTART_KEEP === '1',
  log: (/** @type {string} */ m) => console.log(`[restart] ${m}`),
};
console.log(`[restart] seed ${options.seed} (replay: RESTART_SEED=${options.seed} npm run test:restart)`);
const result = await runChaos(options);
const out = process.env.RESTART_OUT;
if (out) writeFileSync(out, JSON.stringify(result, null, 2));
console.log(JSON.stringify({ ...result, options: undefined }, null, 2));
console.log(`[restart] seed ${result.seed}: ${result.runs} runs, ${result.kills.length} kills, ${result.findings.length} invariant violations${options.keep ? `; state kept in ${result.work}` : ''}`);
process.exit(result.findings.length === 0 ? 0 : 1);
