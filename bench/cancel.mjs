// Cancel latency (docs/BENCHMARKS.md, "Cancel latency"): from the cancel request to the sandbox
// stopped (and from the cancel API's answer), for an agent that exits on SIGTERM. The real runner CLI (`docket-runner listen`)
// runs each run in a process sandbox through a counting proxy; its waiting lease call answers the
// stop as soon as the cancel is recorded (docs/protocol.md, "Lease waits"). Beside it, what a
// polled stop costs: up to one lease refresh interval. The proxy also counts the HTTP requests of
// each cancelled run (runner and daemon), plus the dispatch and the cancel the bench sends itself.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { atExit } from './lib/cleanup.mjs';
import { createOrg, registrationToken } from './lib/docket.mjs';
import { client, sleep } from './lib/http.mjs';
import { runnerCli, stateDir } from './lib/local-worker.mjs';
import { RUNNER_LABELS } from './lib/seed.mjs';
import { round, summarize } from './lib/stats.mjs';
import { countingProxy, exec, exitWithin, runnerEnv } from './idle.mjs';
import { AGENT_IMAGE, dockerEngine, gatewayRelay } from '../runner-cli/test/helpers/docker-engine.mjs';
import { fakeE2b } from '../runner-cli/test/helpers/fake-e2b.mjs';

/** The agent: it works until SIGTERM, then exits at once. */
const AGENT = "process.on('SIGTERM', () => process.exit(0));\nsetInterval(() => {}, 1000);\n";
/** How long one step of a sample may take before the section fails. */
const STEP_TIMEOUT_MS = 60_000;

/**
 * @param {string} url a running Docket with its default lease settings
 * @param {{ samples: number, leaseRefreshMs: number }} cfg
 * @param {(line: string) => void} say
 */
export async function cancelLatency(url, cfg, say) {
  const result = await measureCancels(url, cfg, say, { name: 'process', agent: (path) => [process.execPath, path], listenArgs: [] });
  return { ...result, docker: await dockerCancels(url, cfg, say), e2b: await e2bCancels(url, cfg, say) };
}

/**
 * The same measure through the e2b launcher, its sandboxes made by E2B's SDK at the local stand-in
 * the runner's tests use (no E2B account is reached): from the cancel request to the sandbox
 * killed, which the launcher does before it says `sandbox_stopped`.
 * @param {string} url @param {{ samples: number, leaseRefreshMs: number }} cfg @param {(line: string) => void} say
 */
async function e2bCancels(url, cfg, say) {
  say('  the same through the e2b launcher, one E2B sandbox per run (a local stand-in of E2B)');
  const e2b = await fakeE2b();
  try {
    return await measureCancels(url, cfg, say, {
      name: 'e2b', agent: (path) => [process.execPath, path], listenArgs: ['--launcher', 'e2b', '--e2b-api-url', e2b.url, '--e2b-sandbox-url', e2b.url],
      env: { DOCKET_E2B_API_KEY: e2b.apiKey },
    });
  } finally {
    await e2b.close();
  }
}

/**
 * The same measure through the docker launcher, where a Docker engine answers (scripts/docker-engine.sh
 * starts one and builds its image): from the cancel request to the container stopped and removed.
 * The container reaches the proxy at the engine's gateway, through a relay.
 * @param {string} url @param {{ samples: number, leaseRefreshMs: number }} cfg @param {(line: string) => void} say
 */
async function dockerCancels(url, cfg, say) {
  const engine = dockerEngine();
  if (!engine.ok) {
    say(`  docker row skipped: no Docker engine (${engine.why}); scripts/docker-engine.sh starts one`);
    return { skipped: engine.why };
  }
  say('  the same through the docker launcher, one container per run');
  return measureCancels(url, cfg, say, {
    name: 'docker', agent: () => ['node', '-e', AGENT], listenArgs: ['--launcher', 'docker', '--docker-image', AGENT_IMAGE], relay: gatewayRelay,
  });
}

/**
 * Cancel `cfg.samples` running runs of one real runner and time each to its `sandbox_stopped`.
 * @param {string} url @param {{ samples: number, leaseRefreshMs: number }} cfg @param {(line: string) => void} say
 * @param {{ name: string, agent: (path: string) => string[], listenArgs: string[], env?: Record<string, string>, relay?: (url: string) => Promise<{ close: () => Promise<unknown> }> }} launcher
 */
async function measureCancels(url, cfg, say, launcher) {
  const api = client(url);
  const org = await createOrg(api, `bench-cancel-${launcher.name}`);
  const proxy = await countingProxy(url);
  const relay = await launcher.relay?.(proxy.url);
  const home = stateDir(`runner-cancel-${launcher.name}`);
  const agentPath = join(home.dir, 'agent.mjs');
  writeFileSync(agentPath, AGENT);
  const env = { ...runnerEnv(home.dir), ...launcher.env };
  const reg = await exec([runnerCli(), 'register', '--server', proxy.url, '--token', await registrationToken(api, org.admin), '--name', 'cancel', '--label', RUNNER_LABELS.join(',')], env);
  if (reg.code !== 0) throw new Error(`docket-runner register: ${reg.output}`);
  const child = spawn(process.execPath, [runnerCli(), 'listen', '--json', ...launcher.listenArgs], { env, stdio: ['ignore', 'pipe', 'ignore'] });
  const forget = atExit(() => child.kill('SIGKILL'));
  child.once('exit', forget);
  const events = runnerEvents(child);
  try {
    await events.next((e) => e.event === 'started');
    const latencies = [];
    const afterAnswer = [];
    proxy.open();
    for (let i = 0; i < cfg.samples; i++) {
      const launch = { protocol: launcher.name, command: launcher.agent(agentPath) };
      const body = { brief: 'cancel benchmark', labels: RUNNER_LABELS, launch };
      const res = await api.call('POST', '/v1/runs', { token: org.admin, body, headers: { 'Idempotency-Key': `bench-cancel-${crypto.randomUUID()}` } });
      if (res.status !== 201) throw new Error(`POST /v1/runs: ${res.status} ${JSON.stringify(res.body)}`);
      const runId = res.body.id;
      await events.next((e) => e.event === 'launched' && e.run_id === runId);
      // The cancel lands anywhere in the lease wait, as a person's would.
      await sleep(200 + Math.random() * 800);
      const requestedAt = Date.now();
      const cancel = await api.call('POST', `/v1/runs/${runId}/cancel`, { token: org.admin, body: { reason: 'benchmark' } });
      const answeredAt = Date.now();
      if (cancel.status !== 202) throw new Error(`cancel of a running run answered ${cancel.status} ${JSON.stringify(cancel.body)}`);
      const stopped = await events.next((e) => e.event === 'sandbox_stopped' && e.run_id === runId);
      latencies.push(stopped.at_ms - requestedAt);
      // Negative when the sandbox stopped before the cancel's answer reached the client: the run
      // object answers the waiting lease call while it records the stop, before the cancel answers.
      afterAnswer.push(stopped.at_ms - answeredAt);
      const ended = await events.next((e) => e.event === 'run_ended' && e.run_id === runId);
      if (ended.outcome !== 'cancelled') throw new Error(`run ${runId} ended ${ended.outcome}, not cancelled`);
      if ((i + 1) % 10 === 0 || i + 1 === cfg.samples) say(`  ${i + 1} of ${cfg.samples} samples`);
    }
    const counts = proxy.close();
    // Through the proxy: the runner's and its daemons' calls, including the claims between runs.
    const perRun = counts.total / cfg.samples + 2;
    return {
      samples: cfg.samples,
      cancel_to_stopped_ms: summarize(latencies),
      answer_to_stopped_ms: summarize(afterAnswer),
      samples_ms: latencies.map((v) => round(v, 1)),
      polled: { lease_refresh_ms: cfg.leaseRefreshMs, mean_ms: cfg.leaseRefreshMs / 2, max_ms: cfg.leaseRefreshMs },
      requests_per_cancelled_run: perRun,
      by_path: collapseRunPaths(counts.byPath),
    };
  } finally {
    child.kill('SIGTERM');
    await exitWithin(child, 10_000);
    await relay?.close();
    await proxy.stop();
    home.remove();
  }
}

/** Request counts by call, with run ids replaced by :id. @param {Record<string, number>} byPath */
function collapseRunPaths(byPath) {
  /** @type {Record<string, number>} */
  const out = {};
  for (const [path, n] of Object.entries(byPath)) {
    const key = path.replace(/\/runs\/run_[0-9a-f]+/, '/runs/:id');
    out[key] = (out[key] ?? 0) + n;
  }
  return out;
}

/**
 * The runner's --json lines as events; next(match) resolves with the first event, seen or to come,
 * that matches and was not taken before.
 * @param {import('node:child_process').ChildProcess} child
 */
function runnerEvents(child) {
  /** @type {any[]} */
  const seen = [];
  /** @type {Array<() => void>} */
  let wake = [];
  let rest = '';
  child.stdout?.setEncoding('utf8');
  child.stdout?.on('data', (d) => {
    rest += d;
    let i;
    while ((i = rest.indexOf('\n')) >= 0) {
      const line = rest.slice(0, i);
      rest = rest.slice(i + 1);
      try {
        seen.push(JSON.parse(line));
      } catch {
        // not an event line
      }
    }
    for (const w of wake.splice(0)) w();
  });
  return {
    /** @param {(e: any) => boolean} match */
    async next(match) {
      const deadline = Date.now() + STEP_TIMEOUT_MS;
      for (;;) {
        const at = seen.findIndex(match);
        if (at >= 0) return seen.splice(at, 1)[0];
        if (child.exitCode !== null) throw new Error(`the runner exited (code ${child.exitCode}) while the bench waited for an event`);
        if (Date.now() > deadline) throw new Error(`no matching runner event within ${STEP_TIMEOUT_MS} ms`);
        await new Promise((resolve) => {
          wake.push(() => resolve(undefined));
          setTimeout(resolve, 500);
        });
      }
    },
  };
}
