// Idle cost (docs/BENCHMARKS.md): HTTP requests per minute per idle runner, and the memory (RSS)
// of idle `docket-runner listen` processes. The real runner CLI runs with nothing to do against a
// Docket whose claim wait is shortened, through a counting proxy on 127.0.0.1, for a bounded window.
// An idle runner's claim is its heartbeat: it sends one claim per long-poll (claim_wait_ms plus a
// round trip) and no separate heartbeat, so its rate is 60,000 / claim_wait_ms per minute; the
// measured rate at the short setting checks that formula, which then gives the rate at the defaults.
import { spawn } from 'node:child_process';
import { createServer, request } from 'node:http';
import { readFileSync } from 'node:fs';
import { createOrg, parseCost, registrationToken } from './lib/docket.mjs';
import { client, sleep } from './lib/http.mjs';
import { atExit } from './lib/cleanup.mjs';
import { runnerCli, stateDir } from './lib/local-worker.mjs';
import { RUNNER_LABELS } from './lib/seed.mjs';
import { round, summarize } from './lib/stats.mjs';

const CLAIM_PATH = '/v1/runners/claim';
const HEARTBEAT_PATH = '/v1/runners/heartbeat';

/** Requests per minute of one idle runner with this claim wait (its claims are its heartbeats). */
export function idleRequestsPerMinute(claimWaitMs) {
  return 60_000 / claimWaitMs;
}

/**
 * The resident memory of a process in MB (VmRSS of /proc/<pid>/status), or null where there is no
 * /proc (not Linux) or the process is gone.
 * @param {number | undefined} pid
 */
export function rssMb(pid) {
  try {
    const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb ? Number(kb) / 1024 : null;
  } catch {
    return null;
  }
}

/**
 * @param {string} url a running Docket started with CLAIM_WAIT_MS = cfg.claimWaitMs and
 *   HEARTBEAT_INTERVAL_MS = cfg.heartbeatIntervalMs
 * @param {{ runners: number, windowMs: number, claimWaitMs: number, heartbeatIntervalMs: number,
 *   defaults: { claimWaitMs: number, heartbeatIntervalMs: number } }} cfg
 * @param {(line: string) => void} say
 */
export async function idleCost(url, cfg, say) {
  const api = client(url);
  const org = await createOrg(api, 'bench-idle');
  const proxy = await countingProxy(url);
  const homes = [];
  /** @type {import('node:child_process').ChildProcess[]} */
  const children = [];
  try {
    for (let i = 0; i < cfg.runners; i++) {
      const home = stateDir(`runner-${i}`);
      homes.push(home);
      const env = runnerEnv(home.dir);
      const token = await registrationToken(api, org.admin);
      // Not spawnSync: the registration goes through the proxy, which runs in this process.
      const reg = await exec([runnerCli(), 'register', '--server', proxy.url, '--token', token, '--name', `idle-${i}`, '--label', RUNNER_LABELS.join(',')], env);
      if (reg.code !== 0) throw new Error(`docket-runner register: ${reg.output}`);
      const child = spawn(process.execPath, [runnerCli(), 'listen', '--json'], { env, stdio: ['ignore', 'ignore', 'ignore'] });
      children.push(child);
      const forget = atExit(() => child.kill('SIGKILL'));
      child.once('exit', forget);
    }
    // Let every runner finish its start (first heartbeat, reconciliation) before the window opens.
    await sleep(Math.max(2_000, cfg.claimWaitMs));
    const exited = children.filter((c) => c.exitCode !== null);
    if (exited.length > 0) throw new Error(`${exited.length} runner(s) exited at start (exit code ${exited[0].exitCode})`);
    say(`  ${cfg.runners} idle runners listening; counting their requests for ${cfg.windowMs / 1000} s`);
    proxy.open();
    await sleep(cfg.windowMs);
    const counts = proxy.close();
    // Measured at the end of the window, after a dozen idle claims each.
    const rss = children.map((c) => rssMb(c.pid)).filter((v) => v !== null);

    const minutes = cfg.windowMs / 60_000;
    const perRunnerPerMin = (/** @type {number} */ n) => n / cfg.runners / minutes;
    const expected = idleRequestsPerMinute(cfg.claimWaitMs);
    const measured = perRunnerPerMin(counts.total);
    const atDefaults = idleRequestsPerMinute(cfg.defaults.claimWaitMs);
    // D1 rows per idle call, from the Docket-Cost of the answers (means over the window).
    const per = (/** @type {string} */ path, /** @type {'d1_rows_read' | 'd1_rows_written'} */ k) => {
      const sum = counts.costByPath[path];
      return sum && sum.answers > 0 ? sum[k] / sum.answers : 0;
    };
    const claimCost = { d1_rows_read: per(CLAIM_PATH, 'd1_rows_read'), d1_rows_written: per(CLAIM_PATH, 'd1_rows_written') };
    const heartbeatCost = { d1_rows_read: per(HEARTBEAT_PATH, 'd1_rows_read'), d1_rows_written: per(HEARTBEAT_PATH, 'd1_rows_written') };
    const rowsPerMin = (/** @type {number} */ claimsPerMin, /** @type {number} */ heartbeatsPerMin, /** @type {'d1_rows_read' | 'd1_rows_written'} */ k) =>
      claimsPerMin * claimCost[k] + heartbeatsPerMin * heartbeatCost[k];
    const claimsAtDefaults = 60_000 / cfg.defaults.claimWaitMs;
    // The heartbeats an idle runner sends, scaled like its claims (none, when its claims are its heartbeats).
    const heartbeatsAtDefaults = (perRunnerPerMin(counts.byPath[HEARTBEAT_PATH] ?? 0) * cfg.claimWaitMs) / cfg.defaults.claimWaitMs;
    return {
      runners: cfg.runners,
      window_ms: cfg.windowMs,
      claim_wait_ms: cfg.claimWaitMs,
      heartbeat_interval_ms: cfg.heartbeatIntervalMs,
      requests: counts.total,
      by_path: counts.byPath,
      cost_by_path: counts.costByPath,
      claims_per_min: perRunnerPerMin(counts.byPath[CLAIM_PATH] ?? 0),
      heartbeats_per_min: perRunnerPerMin(counts.byPath[HEARTBEAT_PATH] ?? 0),
      requests_per_min: measured,
      expected_per_min: expected,
      measured_over_expected: measured / expected,
      idle_claim_cost: claimCost,
      heartbeat_cost: heartbeatCost,
      d1_rows_read_per_min: rowsPerMin(perRunnerPerMin(counts.byPath[CLAIM_PATH] ?? 0), perRunnerPerMin(counts.byPath[HEARTBEAT_PATH] ?? 0), 'd1_rows_read'),
      d1_rows_written_per_min: rowsPerMin(perRunnerPerMin(counts.byPath[CLAIM_PATH] ?? 0), perRunnerPerMin(counts.byPath[HEARTBEAT_PATH] ?? 0), 'd1_rows_written'),
      rss_mb: rss.length > 0 ? { ...summarize(rss), per_runner: rss.map((v) => round(v, 1)) } : null,
      defaults: {
        claim_wait_ms: cfg.defaults.claimWaitMs,
        heartbeat_interval_ms: cfg.defaults.heartbeatIntervalMs,
        claims_per_min: claimsAtDefaults,
        heartbeats_per_min: heartbeatsAtDefaults,
        requests_per_min: atDefaults,
        scaled_from_measured: round((atDefaults * measured) / expected, 3),
        d1_rows_read_per_min: rowsPerMin(claimsAtDefaults, heartbeatsAtDefaults, 'd1_rows_read'),
        d1_rows_written_per_min: rowsPerMin(claimsAtDefaults, heartbeatsAtDefaults, 'd1_rows_written'),
      },
    };
  } finally {
    for (const c of children) c.kill('SIGTERM');
    await Promise.all(children.map((c) => exitWithin(c, 10_000)));
    await proxy.stop();
    for (const h of homes) h.remove();
  }
}

/** The runner's environment: its own home, nothing from a DOCKET_* setting of this shell. */
export function runnerEnv(home) {
  /** @type {Record<string, string>} */
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('DOCKET_') && v !== undefined) env[k] = v;
  return { ...env, DOCKET_RUNNER_HOME: home };
}

/**
 * Runs the runner CLI to its end (at most a minute).
 * @param {string[]} args @param {Record<string, string>} env
 * @returns {Promise<{ code: number | null, output: string }>}
 */
export function exec(args, env) {
  const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) =>
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    }),
  );
}

/** Waits for a child to exit; SIGKILL after `ms`. @param {import('node:child_process').ChildProcess} child */
export async function exitWithin(child, ms) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const timer = setTimeout(() => child.kill('SIGKILL'), ms);
  await exited;
  clearTimeout(timer);
}

/**
 * A proxy on 127.0.0.1 in front of Docket that counts the requests arriving while it is open, by
 * path, and sums the Docket-Cost of their answers by path.
 * @param {string} target
 */
export async function countingProxy(target) {
  const upstream = new URL(target);
  let counting = false;
  const counts = {
    total: 0,
    /** @type {Record<string, number>} */ byPath: {},
    /** @type {Record<string, { answers: number, d1_rows_read: number, d1_rows_written: number }>} */ costByPath: {},
  };
  const server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    const counted = counting;
    if (counted) {
      counts.total += 1;
      counts.byPath[path] = (counts.byPath[path] ?? 0) + 1;
    }
    const up = request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (upRes) => {
      const cost = parseCost(new Headers({ 'docket-cost': String(upRes.headers['docket-cost'] ?? '') }));
      if (counted && cost) {
        const sum = (counts.costByPath[path] ??= { answers: 0, d1_rows_read: 0, d1_rows_written: 0 });
        sum.answers += 1;
        sum.d1_rows_read += cost.d1_rows_read;
        sum.d1_rows_written += cost.d1_rows_written;
      }
      res.writeHead(upRes.statusCode ?? 502, upRes.headers);
      upRes.pipe(res);
    });
    up.on('error', () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    res.on('close', () => {
      if (!res.writableFinished) up.destroy(); // the runner went away mid long-poll
    });
    req.pipe(up);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const address = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${address.port}`,
    open: () => {
      counting = true;
    },
    close: () => {
      counting = false;
      return structuredClone(counts);
    },
    stop: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve(undefined)));
    },
  };
}
