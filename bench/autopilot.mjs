// Autopilot within GitHub's budget (docs/BENCHMARKS.md, "Autopilot within GitHub's budget"): what
// an autopilot project spends of its GitHub App installation's hourly request limit, measured from
// outside with the GitHub stand-in behind a counting proxy (bench/lib/github-counter.mjs). An idle
// project (queue capacity 5, no runner) at N ready issues over a window of cron ticks; how many
// ticks a lost webhook waits; the webhook door's cost and latency; a burst of deliveries; and a
// published pull request's cost, with the real runner CLI pushing to a local bare repository.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { exec, exitWithin, runnerEnv } from './idle.mjs';
import { atExit } from './lib/cleanup.mjs';
import { registrationToken } from './lib/docket.mjs';
import { tally } from './lib/github-counter.mjs';
import { createProject, cronTick, deliverLabeled, eventually, readTicket, REPO, startStandIn } from './lib/github-project.mjs';
import { client, pool } from './lib/http.mjs';
import { runnerCli, stateDir } from './lib/local-worker.mjs';
import { round, summarize } from './lib/stats.mjs';

const MINUTE_TICKS_PER_HOUR = 60;
/** The ticket statuses that say reconciliation found the issue and decided on it (docs/autopilot.md, "Admission"). */
const FOUND = new Set(['admitted', 'capacity_wait']);
/** How long GitHub hears nothing before the burst's deliveries count as all consumed (a retry waits 5 s: none is expected). */
const BURST_QUIET_MS = 3_000;
/** The characters of the publishing runner's stderr kept for a report. */
const STDERR_KEPT = 600;

/**
 * @typedef {{ readyIssues: number[], warmupTicks: number, warmupTicksMax: number, windowTicks: number, lostWebhookTicksMax: number, sharedIssues: number,
 *   webhookSamples: number, burstIssues: number, burstDeliveries: number, burstConcurrency: number,
 *   publications: number }} AutopilotConfig
 * @typedef {<T>(vars: Record<string, string>, measure: (url: string) => Promise<T>) => Promise<T>} WithDocket
 */

/**
 * The whole section: one Docket of its own per N (an idle project alone in its deployment, as the
 * cron tick serves every project), one for two projects sharing an installation, the webhook door
 * and the burst, one for publication.
 * @param {WithDocket} withDocket @param {Record<string, string>} vars @param {AutopilotConfig} cfg @param {(line: string) => void} say
 */
export async function autopilotBudget(withDocket, vars, cfg, say) {
  const idle = [];
  for (const n of cfg.readyIssues) {
    const row = await withDocket(vars, (url) => idleProject(url, n, cfg));
    if (!row.first_pass_finished) say(`  ${n.toLocaleString('en-US')} ready issues: the first full pass had not finished after ${row.warmup_ticks} warm-up ticks; the window is inside it`);
    say(`  ${n.toLocaleString('en-US')} ready issues: ${round(row.per_tick, 1)} counted requests per tick (${row.per_hour.toLocaleString('en-US')} an hour), ${row.answered_304_pct}% answered 304; lost webhook found after ${row.lost_webhook_ticks ?? `more than ${cfg.lostWebhookTicksMax}`} ticks`);
    idle.push(row);
  }
  const doors = await withDocket(vars, async (url) => {
    // First, while the Docket holds no other project for its cron ticks to visit.
    const shared = await sharedInstallation(url, cfg);
    say(`  two projects sharing an installation, ${shared.issues_each} ready issues each: ${shared.projects.map((p) => `${p.examined} examined`).join(' and ')} in their first full pass (${shared.ticks} ticks)`);
    const webhook = await webhookDoor(url, cfg.webhookSamples);
    say(`  webhook door: ${webhook.counted_per_admitted} counted requests per admitted issue; labelled → queued p50 ${round(webhook.labelled_to_queued_ms.p50, 0)} ms, p99 ${round(webhook.labelled_to_queued_ms.p99, 0)} ms`);
    const burst = await deliveryBurst(url, cfg);
    say(`  burst: ${burst.deliveries} deliveries over ${burst.issues} issues: ${burst.runs_admitted} runs admitted, ${burst.errors} errors`);
    return { shared, webhook, burst };
  });
  // Publication in a Docket of its own: its one webhook delivery must not queue behind another
  // measurement's (the local Queues consumer takes one batch at a time).
  const publication = cfg.publications > 0 ? await withDocket(vars, (url) => publications(url, cfg.publications)).catch((e) => ({ failed: String(e?.message ?? e) })) : null;
  if (publication?.failed) say(`  publication: not measured: ${publication.failed}`);
  else if (publication) say(`  publication: ${publication.counted_to_comment.mean} counted requests from the push credential to the comment (${publication.counted_whole.mean} with the label move)`);
  return { idle, ...doors, publication, config: cfg };
}

/**
 * One idle project at `n` ready issues: warm-up ticks (its first full pass: the first admissions
 * fill the queue, the rest wait for capacity), the window of ticks counted, then an issue labelled
 * with its webhook lost, and the ticks until reconciliation finds it.
 * @param {string} url @param {number} n @param {AutopilotConfig} cfg
 */
async function idleProject(url, n, cfg) {
  const api = client(url);
  const standIn = await startStandIn();
  try {
    const seedStarted = performance.now();
    standIn.addReadyIssues(1, n);
    const seedMs = performance.now() - seedStarted;
    const { org, projectId } = await createProject(api, standIn, { name: `idle-${n}`, queueCapacity: 5 });
    const warmupStarted = performance.now();
    const warmup = await warmUp(api, url, org.admin, projectId, cfg);
    const warmupMs = performance.now() - warmupStarted;
    const warmupCost = tally(standIn.counter.calls);
    const perTick = [];
    const tickMs = [];
    const windowStart = standIn.counter.mark();
    for (let i = 0; i < cfg.windowTicks; i++) {
      const mark = standIn.counter.mark();
      const started = performance.now();
      await cronTick(url);
      tickMs.push(performance.now() - started);
      perTick.push(tally(standIn.counter.since(mark)).counted);
    }
    const window = tally(standIn.counter.since(windowStart));
    const counted = window.counted / cfg.windowTicks;
    const lost = n + 1;
    standIn.addReadyIssues(lost, lost);
    let lostWebhookTicks = null;
    for (let tick = 1; tick <= cfg.lostWebhookTicksMax && lostWebhookTicks === null; tick++) {
      await cronTick(url);
      if (FOUND.has((await readTicket(api, org.admin, projectId, lost))?.status)) lostWebhookTicks = tick;
    }
    return {
      ready_issues: n,
      seed_ms: round(seedMs, 0),
      warmup_ticks: warmup.ticks,
      warmup_ms: round(warmupMs, 0),
      // The window follows the project's first full pass, unless the warm-up's bound came first.
      first_pass_finished: warmup.firstPassFinished,
      warmup_counted: warmupCost.counted,
      window_ticks: cfg.windowTicks,
      per_tick: counted,
      per_hour: Math.round(counted * MINUTE_TICKS_PER_HOUR),
      counted_each_tick: perTick,
      answered_304_pct: round((100 * window.not_modified) / Math.max(1, window.counted + window.not_modified), 1),
      by_kind: window.by_kind,
      tick_ms: summarize(tickMs),
      lost_webhook_ticks: lostWebhookTicks,
    };
  } finally {
    await standIn.stop();
  }
}

/**
 * Cron ticks until the project's first full reconciliation pass has finished (the project read's
 * `reconciliation.last_full_pass_finished_at_ms`): every ready issue seen once, the queue filled,
 * the rest waiting for capacity. At least `warmupTicks`, at most `warmupTicksMax`.
 * @param {ReturnType<typeof client>} api @param {string} url @param {string} token @param {string} projectId @param {AutopilotConfig} cfg
 */
async function warmUp(api, url, token, projectId, cfg) {
  let firstPassFinished = false;
  let ticks = 0;
  while (ticks < cfg.warmupTicksMax && (ticks < cfg.warmupTicks || !firstPassFinished)) {
    await cronTick(url);
    ticks += 1;
    const project = await api.call('GET', `/v1/autopilot/projects/${projectId}`, { token });
    firstPassFinished = Boolean(project.body?.reconciliation?.last_full_pass_finished_at_ms);
  }
  return { ticks, firstPassFinished };
}

/**
 * Two projects of one GitHub App installation, each watching a repository of its own with
 * `sharedIssues` ready issues (queue capacity 5, no runner): cron ticks until both first full
 * passes finished (at most `warmupTicksMax`), then each project's tickets are listed. Every ready
 * issue examined once in the pass has a ticket that is admitted or waits for capacity (docs/autopilot.md, "Reconciliation").
 * @param {string} url @param {AutopilotConfig} cfg
 */
async function sharedInstallation(url, cfg) {
  const api = client(url);
  const standIn = await startStandIn();
  try {
    const repositories = [REPO, `${REPO}-too`];
    const projects = [];
    for (const [i, repository] of repositories.entries()) {
      standIn.addReadyIssues(1, cfg.sharedIssues, repository);
      const { org, projectId } = await createProject(api, standIn, { name: `shared-${i + 1}`, queueCapacity: 5, repository });
      projects.push({ token: org.admin, projectId });
    }
    let ticks = 0;
    /** @type {boolean[]} */
    let finished = [];
    while (ticks < cfg.warmupTicksMax && (ticks === 0 || finished.includes(false))) {
      await cronTick(url);
      ticks += 1;
      finished = await Promise.all(projects.map(async (p) => Boolean((await api.call('GET', `/v1/autopilot/projects/${p.projectId}`, { token: p.token })).body?.reconciliation?.last_full_pass_finished_at_ms)));
    }
    // Found and decided on: admitted or waiting for capacity.
    const tickets = await Promise.all(projects.map((p) => everyPage(api, p.token, `/v1/autopilot/projects/${p.projectId}/tickets`, 'tickets')));
    const examined = tickets.map((list) => list.filter((t) => FOUND.has(t.status)).length);
    return { issues_each: cfg.sharedIssues, ticks, projects: examined.map((n, i) => ({ examined: n, first_pass_finished: finished[i] })) };
  } finally {
    await standIn.stop();
  }
}

/**
 * The webhook door, one issue at a time: a person labels it, its delivery is posted, and the clock
 * stops when its run reads queued (the ticket and the run polled every few ms). Every counted
 * GitHub request over the samples, divided by the issues admitted.
 * @param {string} url @param {number} samples
 */
async function webhookDoor(url, samples) {
  const api = client(url);
  const standIn = await startStandIn();
  try {
    const { org, projectId } = await createProject(api, standIn, { name: 'webhook-door', queueCapacity: samples });
    const start = standIn.counter.mark();
    const latencies = [];
    for (let number = 1; number <= samples; number++) {
      standIn.addReadyIssues(number, number);
      const sent = performance.now();
      const status = await deliverLabeled(api, standIn, projectId, number);
      if (status !== 202) throw new Error(`the webhook of issue ${number} answered ${status}`);
      let ticket = null;
      const runId = await eventually(() => `issue ${number}'s run; its ticket: ${JSON.stringify(ticket)}`, async () => (ticket = await readTicket(api, org.admin, projectId, number))?.run_id, 120_000, 5);
      await eventually(`run ${runId} queued`, async () => (await api.call('GET', `/v1/runs/${runId}`, { token: org.admin })).body?.state === 'queued', 60_000, 5);
      latencies.push(performance.now() - sent);
    }
    const cost = tally(standIn.counter.since(start));
    return {
      samples,
      counted_per_admitted: round(cost.counted / samples, 2),
      by_kind: cost.by_kind,
      labelled_to_queued_ms: summarize(latencies),
    };
  } finally {
    await standIn.stop();
  }
}

/**
 * A burst: `burstDeliveries` labelled deliveries, each with its own delivery id, spread over
 * `burstIssues` issues and posted `burstConcurrency` at a time in shuffled order. Every issue must
 * get exactly one run, and every delivery a 202.
 * @param {string} url @param {AutopilotConfig} cfg
 */
async function deliveryBurst(url, cfg) {
  const api = client(url);
  const standIn = await startStandIn();
  try {
    const { org, projectId } = await createProject(api, standIn, { name: 'burst', queueCapacity: cfg.burstIssues });
    standIn.addReadyIssues(1, cfg.burstIssues);
    const order = Array.from({ length: cfg.burstDeliveries }, (_, i) => (i % cfg.burstIssues) + 1).sort(() => Math.random() - 0.5);
    const start = standIn.counter.mark();
    const started = performance.now();
    const statuses = await pool(order.length, cfg.burstConcurrency, (i) => deliverLabeled(api, standIn, projectId, order[i]));
    const answeredMs = performance.now() - started;
    // The project's ticket list, one request a probe (a hundred reads at once would measure the local proxy).
    const admitted = async () => {
      const tickets = await everyPage(api, org.admin, `/v1/autopilot/projects/${projectId}/tickets`, 'tickets');
      return tickets.filter((t) => t.run_id).length === cfg.burstIssues ? true : null;
    };
    const settled = await eventually('every burst issue admitted', admitted, 120_000, 250).catch(() => false);
    const settledMs = performance.now() - started;
    // Deliveries of an issue that already has its run are still queued: each reads GitHub when it
    // is consumed. The runs are counted once GitHub has heard nothing for a while (a duplicate that
    // admitted a second run is counted), and the stand-in stops only then.
    const drained = await quietFor(standIn.counter, BURST_QUIET_MS, 120_000);
    // Consumed by the stand-in's last call.
    const drainedMs = performance.now() - started - (Date.now() - (standIn.counter.calls.at(-1)?.atMs ?? Date.now()));
    const runs = (await everyPage(api, org.admin, '/v1/runs', 'runs')).length;
    const cost = tally(standIn.counter.since(start));
    return {
      issues: cfg.burstIssues,
      deliveries: order.length,
      concurrency: cfg.burstConcurrency,
      runs_admitted: runs,
      every_issue_admitted: settled === true,
      errors: statuses.filter((s) => s !== 202).length,
      answered_ms: round(answeredMs, 0),
      admitted_ms: round(settledMs, 0),
      every_delivery_consumed: drained,
      consumed_ms: round(drainedMs, 0),
      counted_per_run: round(cost.counted / Math.max(1, runs), 2),
    };
  } finally {
    await standIn.stop();
  }
}

/**
 * Waits until the stand-in has had no request for `quietMs` (at most `timeoutMs`); false when it never was.
 * @param {Awaited<ReturnType<typeof startStandIn>>['counter']} counter @param {number} quietMs @param {number} timeoutMs
 */
async function quietFor(counter, quietMs, timeoutMs) {
  const quiet = async () => Date.now() - (counter.calls.at(-1)?.atMs ?? 0) >= quietMs;
  return eventually('the stand-in to be quiet', quiet, timeoutMs, 250).catch(() => false);
}

/**
 * Every item of a paged list (`{ [field]: [...], next_cursor }`), at most 100 pages of 100.
 * @param {ReturnType<typeof client>} api @param {string} token @param {string} path @param {string} field
 * @returns {Promise<any[]>}
 */
async function everyPage(api, token, path, field) {
  const items = [];
  let cursor = null;
  for (let page = 0; page < 100; page++) {
    const res = await api.call('GET', `${path}?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, { token });
    if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    items.push(...res.body[field]);
    cursor = res.body.next_cursor ?? null;
    if (!cursor) return items;
  }
  throw new Error(`GET ${path}: more than 100 pages`);
}

/**
 * Published pull requests, one at a time: an issue admitted by its webhook, the real runner CLI
 * runs an agent that edits the README, pushes the run's branch with its push credential, and
 * Docket opens the pull request, comments on the issue and moves its labels. Counted: from the push
 * credential's mint to the comment, and to the last tracker delivery (the label move included).
 * @param {string} url @param {number} samples
 */
async function publications(url, samples) {
  const api = client(url);
  const scratch = stateDir('autopilot-publication');
  const standIn = await startStandIn({ htmlUrlBase: scratch.dir });
  const agent = join(scratch.dir, 'agent.mjs');
  writeFileSync(agent, "import { appendFileSync } from 'node:fs';\nappendFileSync('README.md', 'hello, world\\n');\n");
  standIn.github.publication.useBareRepository(REPO, bareRepository(scratch.dir));
  const { org, projectId } = await createProject(api, standIn, { name: 'publication', queueCapacity: samples, launch: [process.execPath, agent] });
  const runner = await startRunner(api, org.admin, scratch.dir);
  try {
    const toComment = [];
    const whole = [];
    /** @type {Record<string, number>} */
    const byKind = {};
    for (let number = 1; number <= samples; number++) {
      const cost = await publishOne(api, standIn, org.admin, projectId, number).catch((e) => {
        throw new Error(`${e?.message ?? e}; ${runner.status()}`);
      });
      toComment.push(cost.toComment.counted);
      whole.push(cost.whole);
      for (const [kind, count] of Object.entries(cost.toComment.by_kind)) byKind[kind] = (byKind[kind] ?? 0) + count;
    }
    return { samples, counted_to_comment: summarize(toComment), counted_whole: summarize(whole), by_kind: byKind };
  } finally {
    await runner.stop();
    await standIn.stop();
    scratch.remove();
  }
}

/**
 * One published pull request and what it cost.
 * @param {ReturnType<typeof client>} api @param {Awaited<ReturnType<typeof startStandIn>>} standIn
 * @param {string} token @param {string} projectId @param {number} number
 */
async function publishOne(api, standIn, token, projectId, number) {
  standIn.addReadyIssues(number, number);
  const mark = standIn.counter.mark();
  if ((await deliverLabeled(api, standIn, projectId, number)) !== 202) throw new Error(`the webhook of issue ${number} was refused`);
  let ticket = null;
  const lastError = async () => JSON.stringify((await api.call('GET', `/v1/autopilot/projects/${projectId}`, { token })).body?.last_error ?? null);
  let projectError = 'null';
  const runId = await eventually(() => `issue ${number}'s run; its ticket: ${JSON.stringify(ticket)}; its project's last error: ${projectError}`, async () => { projectError = await lastError(); return (ticket = await readTicket(api, token, projectId, number))?.run_id; }, 120_000, 100);
  const done = await eventually(`run ${runId} ended`, async () => {
    const run = (await api.call('GET', `/v1/runs/${runId}`, { token })).body;
    return ['completed', 'failed', 'cancelled'].includes(run?.state) ? run : null;
  }, 180_000, 250);
  if (done.state !== 'completed' || !done.publication?.pr) throw new Error(`run ${runId} ended ${done.state} without a pull request: ${JSON.stringify(done)}`);
  await eventually(`run ${runId}'s tracker deliveries`, async () => {
    const res = await api.call('GET', `/v1/runs/${runId}/deliveries`, { token });
    return res.status === 200 && res.body.deliveries.length > 0 && res.body.deliveries.every((/** @type {any} */ d) => d.status === 'delivered');
  }, 120_000, 250);
  const calls = standIn.counter.since(mark);
  const from = calls.findIndex((c) => c.pushToken);
  const comment = calls.findIndex((c, i) => i > from && c.kind === 'comment');
  if (from < 0 || comment < 0) throw new Error(`run ${runId}: no push credential or no comment among its GitHub calls`);
  return { toComment: tally(calls.slice(from, comment + 1)), whole: tally(calls.slice(from)).counted };
}

/** A bare repository at <dir>/acme/widgets, the repository URL admission derives from the stand-in's issues. @param {string} dir */
function bareRepository(dir) {
  const src = join(dir, 'seed');
  const bare = join(dir, ...REPO.split('/'));
  mkdirSync(src, { recursive: true });
  const env = { ...process.env, GIT_AUTHOR_NAME: 'bench', GIT_AUTHOR_EMAIL: 'bench@example.com', GIT_COMMITTER_NAME: 'bench', GIT_COMMITTER_EMAIL: 'bench@example.com' };
  const git = (/** @type {string[]} */ args, cwd = src) => {
    const r = spawnSync('git', args, { cwd, env, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
  };
  writeFileSync(join(src, 'README.md'), 'hello\n');
  git(['init', '--quiet', '--initial-branch=main']);
  git(['add', 'README.md']);
  git(['commit', '--quiet', '-m', 'initial']);
  git(['clone', '--quiet', '--bare', src, bare], dir);
  return bare;
}

/** The runner CLI registered in the organization and listening, until `stop()`. @param {ReturnType<typeof client>} api */
async function startRunner(api, admin, dir) {
  const home = join(dir, 'runner');
  mkdirSync(home, { recursive: true });
  const env = runnerEnv(home);
  const reg = await exec([runnerCli(), 'register', '--server', api.base, '--token', await registrationToken(api, admin), '--name', 'publisher'], env);
  if (reg.code !== 0) throw new Error(`docket-runner register: ${reg.output}`);
  const child = spawn(process.execPath, [runnerCli(), 'listen', '--json'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  const forget = atExit(() => child.kill('SIGKILL'));
  child.once('exit', forget);
  // The end of what it said on stderr, for a publication that could not be measured.
  let stderr = '';
  child.stderr?.on('data', (chunk) => (stderr = (stderr + chunk).slice(-STDERR_KEPT)));
  return {
    /** Whether it still runs and what it last said on stderr, as a sentence. */
    status: () => `the runner ${child.exitCode === null && child.signalCode === null ? 'is listening' : `exited (${child.exitCode ?? child.signalCode})`}${stderr ? `, its stderr ends: ${stderr.trim()}` : ''}`,
    stop: async () => {
      child.kill('SIGTERM');
      await exitWithin(child, 10_000);
    },
  };
}
