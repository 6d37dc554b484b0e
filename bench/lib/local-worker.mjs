// Local Workers for the benchmarks, started the way the end-to-end tests start Docket
// (test/e2e/helpers.mjs): wrangler's unstable_startWorker on 127.0.0.1, D1 migrations applied
// with `wrangler d1 migrations apply --local` to a fresh persist directory; D1, Durable Objects
// and Queues all local. Nothing here reaches the internet.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { applyLocalMigrations } from '../../scripts/local-migrations.mjs';
import { scratchInMemory } from '../../scripts/scratch-in-memory.mjs';
import { atExit } from './cleanup.mjs';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

// Set before wrangler is loaded: no telemetry, no fetch of `Request.cf` from Cloudflare.
process.env.WRANGLER_SEND_METRICS = 'false';
process.env.CLOUDFLARE_CF_FETCH_ENABLED = 'false';
process.env.WRANGLER_LOG ??= 'warn'; // no line per Queue batch
// A config file edited during a run must not rebuild a Worker in the middle of a measurement.
process.env.WRANGLER_CI_DISABLE_CONFIG_WATCHING = 'true';
/**
 * Where the Workers' local state is kept, the same for Docket and the floor: in memory when the
 * machine allows, as the tests keep theirs (docs/BENCHMARKS.md, "Where local state is kept").
 */
export const SCRATCH = scratchInMemory();
/** @type {Promise<typeof import('wrangler')> | undefined} */
let loading;
/** Wrangler, loaded when a Worker or the database is first needed (so `--help` answers at once). */
const wrangler = () => (loading ??= import('wrangler'));

/** A temp directory for local state; `remove()` deletes it, and so does an exit before that. */
export function stateDir(prefix) {
  const dir = mkdtempSync(join(tmpdir(), `docket-bench-${prefix}-`));
  const removeDir = () => rmSync(dir, { recursive: true, force: true });
  const forget = atExit(removeDir);
  return {
    dir,
    remove: () => {
      forget();
      removeDir();
    },
  };
}

/** What a Worker is built from: the files wrangler.toml, its `main` and its migrations need. */
const DOCKET_SOURCES = ['wrangler.toml', 'package.json', 'tsconfig.json', 'src', 'durable-objects', 'migrations'];

/**
 * A copy of Docket's source to run the benchmark on, made once at the start: wrangler rebuilds and
 * restarts a local Worker when its files change, so an edit during a run would cut requests and
 * measure other code. `head` takes the files of the last commit (git archive), `worktree` the files
 * as they are. Answers the copy's wrangler.toml.
 * @param {'head' | 'worktree'} from
 */
export function snapshotDocket(from) {
  const { dir } = stateDir('source');
  // The container images wrangler.toml names are checked when it is read (a local run starts none):
  // their directory comes too, as git knows it (not what it ignores there, such as a staged build).
  const containers = gitFiles(from === 'head' ? ['ls-tree', '-r', '--name-only', 'HEAD', 'containers'] : ['ls-files', '--cached', '--others', '--exclude-standard', 'containers']);
  if (from === 'head') {
    const archive = spawnSync('git', ['archive', '--format=tar', 'HEAD', ...DOCKET_SOURCES, ...(containers.length > 0 ? ['containers'] : [])], { cwd: ROOT, maxBuffer: 256 * 1024 * 1024 });
    if (archive.status !== 0) throw new Error(`git archive HEAD: ${archive.stderr}`);
    const untar = spawnSync('tar', ['-x', '-C', dir], { input: archive.stdout });
    if (untar.status !== 0) throw new Error(`tar: ${untar.stderr}`);
  } else {
    for (const path of [...DOCKET_SOURCES, ...containers.filter((file) => existsSync(join(ROOT, file)))]) cpSync(join(ROOT, path), join(dir, path), { recursive: true });
  }
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir'); // the bundler resolves packages here
  return join(dir, 'wrangler.toml');
}

/** The files `git <args>` lists, one a line, from the repository's root. @param {string[]} args */
function gitFiles(args) {
  const r = spawnSync('git', args, { cwd: ROOT, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
  return r.stdout.split('\n').filter(Boolean);
}

/** The runner CLI's entry in its copy (runnerCli). */
let runnerEntry = '';

/**
 * The runner CLI (`docket-runner`) the benchmarks run, from a copy of its build made at its first
 * use, for the reason Docket's source is copied: a rebuild of runner-cli/dist during a run (the
 * tests' global setup removes it first) would otherwise leave a runner started then with no CLI.
 * The copy is removed at exit.
 */
export function runnerCli() {
  if (runnerEntry) return runnerEntry;
  const { dir } = stateDir('runner-cli');
  for (const path of ['package.json', 'bin', 'dist']) cpSync(join(ROOT, 'runner-cli', path), join(dir, 'runner-cli', path), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir'); // its packages resolve here
  runnerEntry = join(dir, 'runner-cli', 'bin', 'docket-runner.mjs');
  return runnerEntry;
}

/** Applies a config's D1 migrations to the local database under `persist`. */
export function applyMigrations(configPath, persist) {
  const r = applyLocalMigrations({ persist, config: configPath });
  if (!r.ok) throw new Error(`migrations of ${configPath} failed (${r.attempt} runs): ${r.stdout}\n${r.stderr}`);
}

/**
 * Starts a Worker from its wrangler config on 127.0.0.1 with extra plain-text variables, its
 * DevTools inspector on `inspectorPort` when one is given (bench/profile.mjs), and with
 * `testScheduled` its cron tick run by `GET /__scheduled` (bench/autopilot.mjs).
 * @param {{ config: string, persist: string, vars?: Record<string, string>, inspectorPort?: number, testScheduled?: boolean }} o
 * @returns {Promise<{ url: string, stop: () => Promise<void> }>}
 */
export async function startWorker({ config, persist, vars = {}, inspectorPort, testScheduled = false }) {
  /** @type {Record<string, any>} */
  const bindings = {};
  for (const [k, v] of Object.entries(vars)) bindings[k] = { type: 'plain_text', value: String(v) };
  // The benchmarks measure the engine, not its rate limits: one admin token dispatches every run.
  for (const [name, namespace] of [['RATE_LIMIT_ADDRESS', '1001'], ['RATE_LIMIT_MEMBER', '1002'], ['RATE_LIMIT_RUNNER', '1003']]) {
    bindings[name] = { type: 'ratelimit', namespace_id: namespace, simple: { limit: 1_000_000, period: 60 } };
  }
  const { unstable_startWorker } = await wrangler();
  const worker = await unstable_startWorker({
    config,
    bindings,
    dev: { persist, server: { hostname: '127.0.0.1', port: 0 }, inspector: inspectorPort ? { hostname: '127.0.0.1', port: inspectorPort } : false, watch: false, logLevel: 'error', testScheduled },
  });
  await worker.ready;
  const url = `http://127.0.0.1:${new URL(String(await worker.url)).port}`;
  // A Worker that failed to build still listens but never answers: probe it and fail fast.
  try {
    await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(60_000) });
  } catch (e) {
    await worker.dispose();
    throw new Error(`the local Worker of ${config} does not answer (did it build?): ${e}`);
  }
  return { url, stop: () => worker.dispose() };
}

/**
 * Runs `fn` with the local D1 database (binding DB) of a Worker's config and persist directory,
 * while no Worker uses it. Only that binding is loaded (from a config of its own, with the same
 * database id, so the same local file), so no Durable Object or Queue starts.
 * @template T
 * @param {{ config: string, persist: string }} o
 * @param {(db: D1Database) => Promise<T>} fn
 * @returns {Promise<T>}
 */
export async function withLocalD1({ config, persist }, fn) {
  const { getPlatformProxy, unstable_readConfig } = await wrangler();
  const database = unstable_readConfig({ config }).d1_databases.find((d) => d.binding === 'DB');
  if (!database?.database_id) throw new Error(`${config} has no D1 database bound as DB`);
  const databaseId = database.database_id;
  const configPath = join(persist, 'd1-only.wrangler.json');
  writeFileSync(
    configPath,
    JSON.stringify({
      name: 'docket-bench-seed',
      compatibility_date: '2026-04-20',
      d1_databases: [{ binding: 'DB', database_name: 'bench', database_id: databaseId }],
    }),
  );
  // getPlatformProxy takes the state directory itself (`--persist-to` adds the v3 level).
  const proxy = await getPlatformProxy({ configPath, persist: { path: join(persist, 'v3') }, remoteBindings: false, envFiles: [] });
  try {
    return await fn(/** @type {any} */ (proxy.env).DB);
  } finally {
    await proxy.dispose();
    rmSync(configPath, { force: true });
  }
}
