// End-to-end harness: a real local Worker (wrangler's unstable_startWorker, local D1 with the
// migrations applied, Durable Objects and Queues all local) on loopback, and the real runner CLI
// as child processes. Everything it starts it stops; every temp directory it makes it removes.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Listener } from '../../runner-cli/test/helpers/listener.mjs';
import { migratedState } from './migrated-state.mjs';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const CLI = join(ROOT, 'runner-cli', 'bin', 'docket-runner.mjs');
export const ADMIN_SECRET = 'e2e-admin-secret';
/** The deployment secret autopilot projects' secrets are encrypted under (README, "Configuration"). */
export const AUTOPILOT_SECRET_KEY = 'e2e-autopilot-secret-key-0123456789abcdef';

/** Server timings shortened so the suite runs in minutes; each test may override more. */
export const FAST_VARS = {
  LEASE_TTL_MS: '6000',
  LEASE_REFRESH_MS: '1000',
  LAUNCH_DEADLINE_MS: '20000',
  BACKOFF_BASE_MS: '200',
  BACKOFF_MAX_MS: '400',
  CLAIM_WAIT_MS: '2000',
  HEARTBEAT_INTERVAL_MS: '1000',
};

/** Every answer of the local Worker is checked against its OpenAPI document (src/openapi/operation.ts), as in the workers tests. */
export const CHECK_VARS = { CONTRACT_CHECK: 'enforce' };

/** The fake GitHub listens on loopback, which a deployment reaches only when it allows it (README, "Configuration"). */
export const LOOPBACK_VARS = { OUTBOUND_ALLOW_LOOPBACK: 'true' };

/** @type {string[]} */
const tempDirs = [];

/** A temp directory, removed by removeTempDirs(). @param {string} prefix */
export function tempDir(prefix) {
  const dir = mkdtempSync(join(tmpdir(), `docket-e2e-${prefix}-`));
  tempDirs.push(dir);
  return dir;
}

export function removeTempDirs() {
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/**
 * A local Docket: migrations applied to a fresh persist directory, the Worker on 127.0.0.1.
 * `restart(vars)` brings it back on the same port and storage with other variables.
 * @param {Record<string, string>} [vars]
 */
export async function startDocket(vars = {}) {
  const persist = tempDir('state');
  migratedState(persist);
  let port = 0;
  let worker = null;
  const boot = async (/** @type {Record<string, string>} */ v) => {
    /** @type {Record<string, { type: 'plain_text', value: string }>} */
    const bindings = {};
    for (const [k, val] of Object.entries({ ...FAST_VARS, ...CHECK_VARS, ...LOOPBACK_VARS, AUTOPILOT_SECRET_KEY, ...v, ADMIN_SECRET })) bindings[k] = { type: 'plain_text', value: val };
    // Loaded here, not at the top: the scripts built on these helpers answer --help without it.
    const { unstable_startWorker } = await import('wrangler');
    worker = await unstable_startWorker({
      config: join(ROOT, 'wrangler.toml'),
      bindings,
      dev: { persist, server: { hostname: '127.0.0.1', port }, inspector: false, watch: false, logLevel: 'error' },
    });
    await worker.ready;
    const url = new URL(String(await worker.url));
    port = Number(url.port);
    // A Worker that failed to build still listens but never answers: probe it, and fail fast.
    const base = `http://127.0.0.1:${port}`;
    try {
      await fetch(`${base}/v1/runs`, { signal: AbortSignal.timeout(30_000) });
    } catch (e) {
      await worker.dispose();
      throw new Error(`the local Worker does not answer (did it build? see the wrangler error above): ${e}`);
    }
    return base;
  };
  let url;
  try {
    url = await boot(vars);
  } catch (e) {
    rmSync(persist, { recursive: true, force: true });
    throw e;
  }
  const docket = {
    url,
    persist,
    /** @param {Record<string, string>} v */
    async restart(v = {}) {
      await worker.dispose();
      docket.url = await boot({ ...vars, ...v });
    },
    async stop() {
      await worker?.dispose();
      rmSync(persist, { recursive: true, force: true });
    },
    /** @param {string} method @param {string} path @param {{ token?: string, body?: any, headers?: Record<string, string> }} [o] */
    async api(method, path, { token, body, headers = {} } = {}) {
      const res = await fetch(docket.url + path, {
        signal: AbortSignal.timeout(30_000),
        method,
        headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : null };
    },
  };
  return docket;
}

/**
 * An organization with an admin token and a registration token.
 * @param {Awaited<ReturnType<typeof startDocket>>} docket
 */
export async function createOrg(docket, name = 'acme') {
  const org = await docket.api('POST', '/v1/orgs', { token: ADMIN_SECRET, body: { name } });
  if (org.status !== 201) throw new Error(`POST /v1/orgs: ${org.status} ${JSON.stringify(org.body)}`);
  const admin = org.body.token.token;
  const reg = await docket.api('POST', '/v1/tokens', { token: admin, body: { kind: 'registration' } });
  if (reg.status !== 201) throw new Error(`POST /v1/tokens: ${reg.status} ${JSON.stringify(reg.body)}`);
  return { orgId: org.body.org.id, admin, registration: reg.body.token };
}

/**
 * Dispatch a run.
 * @param {Awaited<ReturnType<typeof startDocket>>} docket @param {string} token @param {any} body
 */
export async function dispatch(docket, token, body) {
  const res = await docket.api('POST', '/v1/runs', { token, body: { brief: 'e2e run', ...body }, headers: { 'Idempotency-Key': `e2e-${Math.random()}` } });
  if (res.status !== 201) throw new Error(`POST /v1/runs: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/**
 * Poll a run until `pred` holds.
 * @param {Awaited<ReturnType<typeof startDocket>>} docket @param {string} token @param {string} runId
 * @param {(run: any) => boolean} pred @param {number} [timeoutMs]
 */
export async function waitForRun(docket, token, runId, pred, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  let run;
  while (Date.now() < deadline) {
    run = (await docket.api('GET', `/v1/runs/${runId}`, { token })).body;
    if (pred(run)) return run;
    await sleep(200);
  }
  throw new Error(`run ${runId} did not reach the expected state in ${timeoutMs} ms; last seen: ${JSON.stringify(run)}`);
}

/** @param {Awaited<ReturnType<typeof startDocket>>} docket @param {string} token @param {string} runId */
export async function allEvents(docket, token, runId) {
  const out = [];
  let cursor = '0';
  for (let i = 0; i < 50; i++) {
    const res = await docket.api('GET', `/v1/runs/${runId}/events?cursor=${cursor}&limit=100`, { token });
    const events = res.body?.events ?? [];
    out.push(...events);
    if (events.length === 0 || res.body.next_cursor == null || res.body.next_cursor === cursor) break;
    cursor = res.body.next_cursor;
  }
  return out;
}

/** @param {number} ms */
export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

/** Wait until `pred` holds, checking every 100 ms. @param {() => boolean} pred @param {number} [timeoutMs] */
export async function until(pred, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`not seen in ${timeoutMs} ms: ${pred}`);
    await sleep(100);
  }
}

/** A runner home (config and data directories) and helpers to run the CLI in it. */
export class RunnerHome {
  constructor() {
    this.home = tempDir('runner');
    /** @type {Set<import('node:child_process').ChildProcess>} */
    this.children = new Set();
  }

  get dataDir() {
    return join(this.home, 'data');
  }

  env(extra = {}) {
    const env = { ...process.env, DOCKET_RUNNER_HOME: this.home, ...extra };
    for (const k of Object.keys(env)) if (k.startsWith('DOCKET_') && !(k in extra) && k !== 'DOCKET_RUNNER_HOME') delete env[k];
    return env;
  }

  /** Run the CLI to completion. @param {string[]} args @param {Record<string, string>} [env] */
  run(args, env = {}) {
    const r = spawnSync(process.execPath, [CLI, ...args], { env: this.env(env), encoding: 'utf8', timeout: 60_000 });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  }

  /**
   * Start `listen --json` in the background; its events can be awaited.
   * @param {string[]} [args] @param {Record<string, string>} [env]
   */
  listen(args = [], env = {}) {
    const child = spawn(process.execPath, [CLI, 'listen', '--json', ...args], { env: this.env(env), stdio: ['ignore', 'pipe', 'pipe'] });
    this.children.add(child);
    const proc = new Listener(child);
    child.on('exit', () => this.children.delete(child));
    return proc;
  }

  /** The job rows as `status --json` prints them. */
  jobs() {
    const r = this.run(['status', '--json']);
    return r.stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)).filter((o) => o.kind === 'job');
  }

  /**
   * Kill every listener, every sandbox process group this home started and every agent's own
   * process group (each daemon recorded its agent in launch.json), then remove it.
   */
  async cleanup() {
    for (const c of this.children) c.kill('SIGKILL');
    const groups = safeJobs(this).map((j) => Number(String(j.sandbox_id ?? '').replace('process-', '')));
    groups.push(...agentPids(this.dataDir));
    for (const pid of groups) {
      if (pid > 1) {
        try {
          process.kill(-pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
    await sleep(100);
    rmSync(this.home, { recursive: true, force: true });
  }
}

/** The agent pids the daemons under a data directory recorded (jobs/<run>/<attempt>/docket/launch.json). @param {string} dataDir */
function agentPids(dataDir) {
  /** @type {number[]} */
  const pids = [];
  let files = [];
  try {
    files = readdirSync(join(dataDir, 'jobs'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith(join('docket', 'launch.json')));
  } catch {
    return pids; // no job was ever launched
  }
  for (const f of files) {
    try {
      const pid = JSON.parse(readFileSync(join(dataDir, 'jobs', f), 'utf8')).agent_pid;
      // A live process of that pid is the agent only while it works in this data directory (pids are reused).
      if (Number.isSafeInteger(pid) && (!existsSync(`/proc/${pid}`) || readlinkSync(`/proc/${pid}/cwd`).startsWith(dataDir))) pids.push(pid);
    } catch {
      // unreadable, or gone meanwhile: nothing to end
    }
  }
  return pids;
}

/** @param {RunnerHome} home */
function safeJobs(home) {
  try {
    return home.jobs();
  } catch {
    return [];
  }
}

/**
 * The preamble of a file about one runner: a runner home and a scratch directory now, and from
 * `start()` (inside a test: it takes seconds) a local Docket with an organization and the runner
 * registered in it. After the file's tests everything is stopped and removed.
 * @param {(fn: () => Promise<void>) => void} afterAll vitest's hook (passed in, so scripts that use this module outside vitest do not load it)
 */
export function runnerSuite(afterAll) {
  const home = new RunnerHome();
  const scratch = tempDir('scratch');
  /** @type {Awaited<ReturnType<typeof startDocket>> | undefined} */
  let docket;
  afterAll(async () => {
    await home.cleanup();
    await docket?.stop();
    removeTempDirs();
  });
  /** @param {Record<string, string>} [vars] */
  const start = async (vars = {}) => {
    docket = await startDocket(vars);
    const org = await createOrg(docket);
    const reg = home.run(['register', '--server', docket.url, '--token', org.registration]);
    if (reg.code !== 0) throw new Error(`docket-runner register exited ${reg.code}: ${reg.stderr}${reg.stdout}`);
    return { docket, org };
  };
  return { home, scratch, start };
}

/**
 * A bare repository with one commit, reachable by path (git clone works on it offline).
 * @returns {{ url: string, commit: string, dir: string }}
 */
export function bareRepo() {
  const dir = tempDir('repo');
  const src = join(dir, 'src');
  const bare = join(dir, 'app.git');
  mkdirSync(src);
  const git = (/** @type {string[]} */ args, cwd = src) => {
    const r = spawnSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, GIT_AUTHOR_NAME: 'e2e', GIT_AUTHOR_EMAIL: 'e2e@example.com', GIT_COMMITTER_NAME: 'e2e', GIT_COMMITTER_EMAIL: 'e2e@example.com' } });
    if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
    return r.stdout.trim();
  };
  git(['init', '--quiet', '--initial-branch=main']);
  writeFileSync(join(src, 'README.md'), 'hello\n');
  git(['add', 'README.md']);
  git(['commit', '--quiet', '-m', 'initial']);
  const commit = git(['rev-parse', 'HEAD']);
  git(['clone', '--quiet', '--bare', src, bare], dir);
  return { url: bare, commit, dir };
}

/** Write a small agent script and return its path. @param {string} dir @param {string} source */
export function agentScript(dir, source) {
  const path = join(dir, `agent-${Math.random().toString(36).slice(2)}.mjs`);
  writeFileSync(path, source);
  return path;
}

/** Whether a sandbox's process group still runs (zombies awaiting their reaper do not count). */
export { groupAlive } from '../../runner-cli/dist/runner-cli/src/procs.js';
