// The whole-plane restart test: a lifecycle load (runs and paid builds) with real runners against a
// local Worker that is killed with SIGKILL and restarted on the same state, at random moments and
// just after a dispatch or a claim commits; then the invariants that must survive any crash.
// Used by test/e2e/restart.test.mjs (short) and scripts/restart-chaos.mjs (long, with knobs).
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { ADMIN_SECRET, FAST_VARS, LOOPBACK_VARS, RunnerHome, agentScript, bareRepo, removeTempDirs, sleep, tempDir } from './helpers.mjs';
import { TERMINAL, readRunObjects, strandedRuns, summary } from './plane-disk.mjs';
import { migratedState } from './migrated-state.mjs';
import { Plane, freePort } from './plane-process.mjs';

/**
 * Server timings: short enough that a lost claim is requeued within the settle period, and a lease
 * longer than a restart (about 5-10 s), so a healthy run never loses its lease to the outage itself.
 * Every restart is an outage for the sweep watermark (ticks are 1 s apart while the plane is up).
 * A build settles through its run's completion callback to the plane's own address, on loopback.
 */
export const RESTART_VARS = {
  ...FAST_VARS,
  ...LOOPBACK_VARS,
  LEASE_TTL_MS: '20000',
  LEASE_REFRESH_MS: '1000',
  LAUNCH_DEADLINE_MS: '12000',
  DAEMON_SILENCE_MS: '30000',
  SWEEP_OUTAGE_THRESHOLD_MS: '5000',
  BUILD_DISPATCH_TIMEOUT_MS: '5000',
  ADMIN_SECRET,
};

export const KILL_KINDS = /** @type {const} */ (['random', 'after-dispatch', 'after-claim']);
/** How long after the trigger line a kill lands, ms: the window between the commit reaching disk and
 * the alarm is a few ms locally, so most kills are sent at once. */
const KILL_LAGS_MS = [0, 0, 0, 1, 3];

/** A small seeded generator (mulberry32), so one seed gives one plan. @param {number} seed */
export function rng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    /** @param {number} lo @param {number} hi */
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    /** @template T @param {readonly T[]} xs @returns {T} */
    pick: (xs) => xs[Math.floor(next() * xs.length)],
  };
}

/**
 * The kills of one chaos run: `kills` kinds, every kind at least once when there are three or more.
 * @param {ReturnType<typeof rng>} r @param {number} kills
 */
export function killPlan(r, kills) {
  const plan = [];
  for (let i = 0; i < kills; i++) plan.push(i < KILL_KINDS.length && kills >= KILL_KINDS.length ? KILL_KINDS[i] : r.pick(KILL_KINDS));
  for (let i = plan.length - 1; i > 0; i--) {
    const j = Math.floor(r.next() * (i + 1));
    [plan[i], plan[j]] = [plan[j], plan[i]];
  }
  return plan;
}

const AGENT = `
import { appendFileSync, writeFileSync } from 'node:fs';
const [ms, cost, log] = process.argv.slice(2);
appendFileSync(log, JSON.stringify({ run: process.env.DOCKET_RUN_ID, attempt: Number(process.env.DOCKET_ATTEMPT), pid: process.pid, at_ms: Date.now() }) + '\\n');
console.log('::phase implementing');
setTimeout(() => {
  writeFileSync('CHANGED.txt', 'changed by the restart test\\n');
  writeFileSync(process.env.DOCKET_RESULT_FILE, JSON.stringify({ model: 'restart-agent', cost_cents: Number(cost) }));
  console.log('agent finished');
}, Number(ms));
`;

/**
 * @typedef {{ seed: number, runs: number, builds: number, kills: number, runners: number,
 *   concurrency: number, settleMs: number, paceMs: [number, number], calmMs: [number, number], log?: (msg: string) => void, keep?: boolean }} ChaosOptions
 * @typedef {{ kind: string, [k: string]: unknown }} Finding
 */

/** One chaos run; never throws for a broken invariant: they come back as findings. @param {ChaosOptions} o */
export async function runChaos(o) {
  const say = o.log ?? (() => {});
  const r = rng(o.seed);
  const work = tempDir('restart');
  const persist = join(work, 'state');
  const launchesLog = join(work, 'launches.jsonl');
  appendFileSync(launchesLog, '');
  const agent = agentScript(work, AGENT);
  const plane = new Plane({ persist, port: await freePort(), vars: RESTART_VARS, logFile: join(work, 'worker.log') });
  /** @type {RunnerHome[]} */
  const homes = [];
  /** @type {import('../../runner-cli/test/helpers/listener.mjs').Listener[]} */
  const listeners = [];
  /** @type {Finding[]} */
  const findings = [];
  /** @type {string[]} */
  const notes = [];
  /** @type {any[]} */
  const kills = [];
  const started = Date.now();
  /** @type {Record<string, number>} */
  const phases = {};
  let phaseStart = started;
  const phase = (/** @type {string} */ name) => {
    phases[name] = Date.now() - phaseStart;
    phaseStart = Date.now();
  };
  let ticking = true;
  let ticker = Promise.resolve();
  try {
    migratedState(persist);
    await plane.start();
    say(`plane up at ${plane.url} (state ${persist})`);
    ticker = (async () => {
      while (ticking) {
        if (plane.up) await plane.tick();
        await sleep(1_000);
      }
    })();
    const api = client(plane);
    const org = await setupOrg(api);
    const repo = bareRepo();
    for (let i = 0; i < o.runners; i++) {
      const home = new RunnerHome();
      homes.push(home);
      const reg = home.run(['register', '--server', plane.url, '--token', org.registration, '--name', `restart-${i}`]);
      if (reg.code !== 0) throw new Error(`register: ${reg.stderr}${reg.stdout}`);
      // Builds name a GitHub URL; git reaches the local bare repository instead (tests are offline).
      const git = { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: `url.${repo.url}.insteadOf`, GIT_CONFIG_VALUE_0: SOURCE_URL };
      listeners.push(home.listen(['--concurrency', String(o.concurrency), '--backoff-base-ms', '200', '--backoff-max-ms', '2000'], git));
    }
    const builds = o.builds > 0 ? await setupBuilds(api, org.admin, o.builds, repo.commit, [process.execPath, agent, '800', '450', launchesLog]) : [];
    phase('setup_ms');

    // The load: runs and builds dispatched at a pace while the plane is killed and restarted.
    const deadline = Date.now() + 30 * 60_000;
    /** @type {Map<string, { key: string, kind: 'run' | 'build', job?: string }>} */
    const dispatched = new Map();
    const dispatchOne = async (/** @type {number} */ i) => {
      const key = `restart-${o.seed}-${i}`;
      const body = { brief: `restart run ${i}`, launch: { command: [process.execPath, agent, String(r.int(300, 2_500)), '0', launchesLog] } };
      const res = await untilAnswered(() => api('POST', '/v1/runs', { token: org.admin, body, headers: { 'Idempotency-Key': key } }), deadline);
      if (res.status !== 201 && res.status !== 200) throw new Error(`dispatch ${key}: ${res.status} ${JSON.stringify(res.body)}`);
      dispatched.set(res.body.id, { key, kind: 'run' });
    };
    const dispatchBuild = async (/** @type {{ requestId: string, jobId: string }} */ b) => {
      const res = await untilAnswered(
        () => api('POST', `/v1/build-requests/${b.requestId}/dispatch`, { token: org.admin, body: {}, headers: { 'Idempotency-Key': b.jobId } }),
        deadline,
      );
      if (![200, 201, 202].includes(res.status)) throw new Error(`build dispatch ${b.jobId}: ${res.status} ${JSON.stringify(res.body)}`);
      if (res.status === 202) notes.push(`build ${b.jobId}: dispatch answered 202 (unconfirmed; reconciliation finishes it)`);
    };
    let nextRun = 0;
    const loadDone = (async () => {
      const order = [...Array(o.runs).keys()].map((i) => ({ run: i }));
      for (const b of builds) order.splice(r.int(0, order.length), 0, { build: b });
      for (const item of order) {
        if ('build' in item) await dispatchBuild(/** @type {any} */ (item.build));
        else await dispatchOne(nextRun++);
        await sleep(r.int(o.paceMs[0], o.paceMs[1]));
      }
    })();

    // The chaos: each kill waits for its moment, then kill -9, a short pause, and a restart.
    let extra = o.runs;
    /** @type {Promise<void>[]} */
    const provoked = [];
    for (const kind of killPlan(r, o.kills)) {
      await sleep(r.int(o.calmMs[0], o.calmMs[1])); // the load goes on undisturbed for a while
      const kill = await killAt(plane, kind, r, () => {
        const p = dispatchOne(extra++);
        p.catch(() => {}); // awaited below, with the others
        provoked.push(p);
      });
      const objects = readRunObjects(persist);
      const stranded = strandedRuns(objects);
      kills.push({ ...kill, committed: landedAfterCommit(kill, objects), run_objects: objects.length, stranded: stranded.map((s) => s.run) });
      for (const s of stranded) {
        if (!findings.some((f) => f.kind === 'no_alarm_after_kill' && f.run === s.run)) findings.push({ kind: 'no_alarm_after_kill', kill: kills.length, kill_kind: kind, ...s });
      }
      const where = kill.run ? `, run ${kill.run}, +${kill.lag_ms} ms, ${kills.at(-1).committed ? 'after' : 'before'} its commit reached disk` : '';
      say(`kill ${kills.length} (${kind}${where}): ${objects.length} run objects, ${stranded.length} with nothing to move them`);
      await sleep(r.int(0, 1_500));
      await plane.start();
    }
    await loadDone;
    await Promise.all(provoked);
    const runIds = new Set([...dispatched.keys(), ...readRunObjects(persist).map((x) => x.id)]);
    phase('load_and_kills_ms');
    say(`load done: ${runIds.size} runs (${builds.length} builds); settling up to ${o.settleMs} ms`);

    // Settle: the cron keeps ticking; wait until every run has ended, or the settle period is over.
    const settleEnd = Date.now() + o.settleMs;
    /** @type {Map<string, any>} */
    let views = new Map();
    for (;;) {
      views = await readViews(api, org.admin, runIds);
      const open = [...views.values()].filter((v) => !TERMINAL.includes(v.state));
      if (open.length === 0 || Date.now() > settleEnd) break;
      await sleep(1_000);
    }
    await settleBuilds(api, org.admin, builds, notes, Date.now() + 10_000);
    phase('settle_ms');
    findings.push(...(await checkRuns(api, org.admin, views)));
    findings.push(...checkAttempts(launchesLog, homes, views));
    findings.push(...(await checkLedger(api, org.admin, builds)));
    listeners.forEach((l, i) => {
      if (l.done) findings.push({ kind: 'runner_exited', runner: i, exit: l.exit, stderr: l.stderr.slice(-500), last_events: l.dump().split('\n').slice(-8) });
    });
    ticking = false;
    await ticker;
    await plane.kill();
    const atEnd = readRunObjects(persist);
    for (const s of strandedRuns(atEnd)) findings.push({ kind: 'no_alarm_at_end', ...s });
    phase('checks_ms');
    return {
      seed: o.seed,
      options: { ...o, log: undefined },
      elapsed_ms: Date.now() - started,
      phases,
      kills,
      runs: runIds.size,
      builds: builds.length,
      states: countBy([...views.values()].map((v) => v.state)),
      attempts: [...views.values()].reduce((n, v) => n + (v.attempt ?? 0), 0),
      findings,
      notes,
      work,
    };
  } finally {
    ticking = false;
    await ticker;
    for (const h of homes) await h.cleanup();
    await plane.close();
    if (!o.keep) removeTempDirs();
  }
}

// ---- the plane's client ------------------------------------------------------------------------

const SOURCE_URL = 'https://github.com/docket-restart/app';

/** @param {Plane} plane */
function client(plane) {
  /** @param {string} method @param {string} path @param {{ token?: string, body?: any, headers?: Record<string, string> }} [o] */
  return async (method, path, { token, body, headers = {} } = {}) => {
    const res = await fetch(plane.url + path, {
      signal: AbortSignal.timeout(20_000),
      method,
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = { raw: text.slice(0, 200) };
    }
    return { status: res.status, body: parsed };
  };
}

/**
 * What a client does when the server goes away: the same request again (same Idempotency-Key)
 * until it gets an answer that is not a server error.
 * @param {() => Promise<{ status: number, body: any }>} send @param {number} deadline
 */
async function untilAnswered(send, deadline) {
  let last = null;
  while (Date.now() < deadline) {
    try {
      const res = await send();
      if (res.status < 500) return res;
      last = res;
    } catch (e) {
      last = e;
    }
    await sleep(250);
  }
  throw new Error(`no answer before the deadline; last: ${last instanceof Error ? last.message : JSON.stringify(last)}`);
}

/**
 * A call, sent again after a dropped connection (wrangler's proxy may close an idle kept-alive
 * connection just as a request goes out).
 * @param {() => Promise<{ status: number, body: any }>} send
 */
function call(send) {
  return untilAnswered(send, Date.now() + 30_000);
}

/** @param {ReturnType<typeof client>} api */
async function setupOrg(api) {
  const org = await call(() => api('POST', '/v1/orgs', { token: ADMIN_SECRET, body: { name: 'restart' } }));
  if (org.status !== 201) throw new Error(`POST /v1/orgs: ${org.status} ${JSON.stringify(org.body)}`);
  const admin = org.body.token.token;
  const reg = await call(() => api('POST', '/v1/tokens', { token: admin, body: { kind: 'registration' } }));
  if (reg.status !== 201) throw new Error(`POST /v1/tokens: ${reg.status} ${JSON.stringify(reg.body)}`);
  return { admin, registration: reg.body.token };
}

/**
 * Credit for every build's full reservation, one project and one planned request per build.
 * @param {ReturnType<typeof client>} api @param {string} admin @param {number} n @param {string} commit @param {string[]} command
 */
async function setupBuilds(api, admin, n, commit, command) {
  const ok = (/** @type {{ status: number, body: any }} */ res, /** @type {string} */ what) => {
    if (res.status >= 300) throw new Error(`${what}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };
  const grant = { amount_cents: 2_500 * n + 1_000, note: 'restart test' };
  ok(await call(() => api('POST', '/v1/credits/grants', { token: admin, body: grant, headers: { 'Idempotency-Key': 'restart-grant' } })), 'grant');
  const project = ok(await call(() => api('POST', '/v1/projects', { token: admin, body: { name: 'restart', source_url: SOURCE_URL, launch: { command } } })), 'project');
  ok(await call(() => api('POST', `/v1/projects/${project.id}/license`, { token: admin, body: { license: 'MIT', accepted: true } })), 'license');
  const out = [];
  for (let i = 0; i < n; i++) {
    const req = ok(await call(() => api('POST', `/v1/projects/${project.id}/requests`, { token: admin, body: { title: `restart build ${i}` } })), 'request');
    ok(await call(() => api('PUT', `/v1/build-requests/${req.id}/plan`, { token: admin, body: { pinned_commit: commit, migration_plan: `restart build ${i}`, chain_target: 'base-sepolia' } })), 'plan');
    out.push({ requestId: req.id, jobId: `job-restart-${i}-${Math.random().toString(36).slice(2, 8)}` });
  }
  return out;
}

// ---- the kills ---------------------------------------------------------------------------------

/**
 * Waits for the kill's moment and kills the plane: after a random pause, or on the first log line
 * saying a dispatch (to queued, reason dispatched) or a claim (to claimed) committed. The kill is
 * sent from the log handler itself, before anything else runs here. With no such commit within
 * 10 s, `provoke` dispatches a run to make one (the caller awaits that dispatch later: it retries
 * across the restart).
 * @param {Plane} plane @param {string} kind @param {ReturnType<typeof rng>} r @param {() => void} provoke
 */
async function killAt(plane, kind, r, provoke) {
  const at = Date.now();
  if (kind === 'random') {
    await sleep(r.int(500, 4_000));
    await plane.kill();
    return { kind, waited_ms: Date.now() - at };
  }
  const match = kind === 'after-dispatch'
    ? (/** @type {any} */ l) => l.msg === 'run.transition' && l.to === 'queued' && l.reason === 'dispatched'
    : (/** @type {any} */ l) => l.msg === 'run.transition' && l.to === 'claimed';
  // The log line comes just before the storage write is flushed and well before the awaited side
  // effects: a few milliseconds later moves the kill from "before the commit reached disk" to
  // "after the commit, before the alarm".
  const lagMs = r.pick(KILL_LAGS_MS);
  /** @type {any} */
  let hit = null;
  const killed = new Promise((resolve) => {
    const off = plane.subscribe((line) => {
      if (hit || !match(line)) return;
      hit = line;
      off();
      const pid = /** @type {number} */ (plane.child?.pid);
      const kill = () => {
        try {
          process.kill(-pid, 'SIGKILL');
        } catch {
          // already gone
        }
        resolve(undefined);
      };
      if (lagMs === 0) kill();
      else setTimeout(kill, lagMs);
    });
  });
  const provoked = (async () => {
    await Promise.race([killed, sleep(10_000)]);
    if (!hit) provoke();
  })();
  await Promise.race([killed, sleep(60_000)]);
  await provoked;
  await plane.kill();
  return { kind, waited_ms: Date.now() - at, lag_ms: lagMs, run: hit?.run ?? null, attempt: hit?.attempt ?? null, triggered: hit !== null };
}

/**
 * Whether a triggered kill landed after the commit reached disk: the dispatched run exists, or the
 * claimed attempt is stored. Null for a random kill.
 * @param {{ kind: string, run?: string | null, attempt?: number | null }} kill @param {ReturnType<typeof readRunObjects>} objects
 */
function landedAfterCommit(kill, objects) {
  if (!kill.run) return null;
  const o = objects.find((x) => x.id === kill.run);
  if (kill.kind === 'after-dispatch') return o !== undefined;
  return o !== undefined && o.attempt >= (kill.attempt ?? 0) && o.state !== 'queued';
}

// ---- the checks --------------------------------------------------------------------------------

/** @param {ReturnType<typeof client>} api @param {string} token @param {Set<string>} ids */
async function readViews(api, token, ids) {
  /** @type {Map<string, any>} */
  const views = new Map();
  for (const id of ids) {
    const res = await untilAnswered(() => api('GET', `/v1/runs/${id}`, { token }), Date.now() + 60_000);
    views.set(id, res.status === 200 ? res.body : { id, state: `http ${res.status}`, error: res.body });
  }
  return views;
}

/**
 * Every run ended, exactly once: its state is terminal and its events hold exactly one run.state
 * event into a terminal state. Every agent here succeeds, so any end but completed is reported too.
 * @param {ReturnType<typeof client>} api @param {string} token @param {Map<string, any>} views
 */
async function checkRuns(api, token, views) {
  /** @type {Finding[]} */
  const out = [];
  for (const [id, v] of views) {
    const events = await allEvents(api, token, id);
    const ends = events.filter((e) => e.type === 'run.state' && TERMINAL.includes(e.data?.to));
    if (!TERMINAL.includes(v.state)) {
      out.push({ kind: 'not_ended', run: id, state: v.state, attempt: v.attempt, steps: v.steps?.length ?? null });
    } else if (ends.length !== 1) {
      out.push({ kind: 'ended_more_than_once', run: id, state: v.state, terminal_events: ends.map((e) => ({ seq: e.seq, to: e.data.to, reason: e.data.reason })) });
    } else if (v.state !== 'completed') {
      out.push({ kind: 'healthy_run_not_completed', run: id, state: v.state, attempt: v.attempt, last_error: v.last_error });
    }
  }
  return out;
}

/** @param {ReturnType<typeof client>} api @param {string} token @param {string} runId */
async function allEvents(api, token, runId) {
  const out = [];
  let cursor = '0';
  for (let i = 0; i < 100; i++) {
    const res = await call(() => api('GET', `/v1/runs/${runId}/events?cursor=${cursor}&limit=200`, { token }));
    const events = res.body?.events ?? [];
    out.push(...events);
    if (events.length === 0 || res.body.next_cursor == null || res.body.next_cursor === cursor) break;
    cursor = res.body.next_cursor;
  }
  return out;
}

/**
 * No attempt ran twice: each (run, attempt) started one agent process (the agents' own log), is
 * held by one runner's job database, and that runner is the machine the run's step names.
 * @param {string} launchesLog @param {RunnerHome[]} homes @param {Map<string, any>} views
 */
export function checkAttempts(launchesLog, homes, views) {
  /** @type {Finding[]} */
  const out = [];
  /** @type {Map<string, number[]>} */
  const launches = new Map();
  for (const line of readFileSync(launchesLog, 'utf8').split('\n').filter(Boolean)) {
    const l = JSON.parse(line);
    const k = `${l.run}#${l.attempt}`;
    launches.set(k, [...(launches.get(k) ?? []), l.pid]);
  }
  for (const [k, pids] of launches) if (pids.length > 1) out.push({ kind: 'attempt_launched_twice', attempt: k, pids });
  /** @type {Map<string, string[]>} */
  const holders = new Map();
  for (const home of homes) {
    const cfg = JSON.parse(readFileSync(join(home.home, 'config.json'), 'utf8'));
    const path = join(home.dataDir, 'jobs.sqlite');
    if (!existsSync(path)) continue;
    const db = new Database(path, { readonly: true });
    try {
      for (const j of db.prepare('SELECT run_id, attempt FROM jobs').all()) {
        const k = `${j.run_id}#${j.attempt}`;
        holders.set(k, [...(holders.get(k) ?? []), cfg.machine_id]);
      }
    } finally {
      db.close();
    }
  }
  for (const [k, machines] of holders) {
    if (machines.length > 1) out.push({ kind: 'attempt_held_by_two_runners', attempt: k, machines });
    const [run, attempt] = k.split('#');
    const step = views.get(run)?.steps?.find((/** @type {any} */ s) => s.attempt === Number(attempt));
    if (step && step.machine_id !== machines[0]) out.push({ kind: 'attempt_on_another_machine', attempt: k, step_machine: step.machine_id, runner_machine: machines[0] });
  }
  for (const [id, v] of views) {
    const attempts = (v.steps ?? []).map((/** @type {any} */ s) => s.attempt);
    if (new Set(attempts).size !== attempts.length) out.push({ kind: 'attempt_step_twice', run: id, attempts });
  }
  return out;
}

/**
 * Builds end settled or released. A job whose run ended but which still holds its reservation is
 * reconciled the way docs/runbook.md says, and noted: the local Queue keeps its messages in
 * memory, so a kill -9 can drop a run's end event after the outbox marked it sent (Cloudflare's
 * Queues keep an accepted message).
 * @param {ReturnType<typeof client>} api @param {string} admin @param {Array<{ jobId: string }>} builds @param {string[]} notes @param {number} deadline
 */
async function settleBuilds(api, admin, builds, notes, deadline) {
  for (const b of builds) {
    for (;;) {
      const job = (await untilAnswered(() => api('GET', `/v1/build-jobs/${b.jobId}`, { token: admin }), deadline + 60_000)).body;
      if (job?.status === 'settled' || job?.status === 'released' || Date.now() > deadline) {
        if (job?.status === 'queued' && job.run_id) {
          const run = (await call(() => api('GET', `/v1/runs/${job.run_id}`, { token: admin }))).body;
          if (TERMINAL.includes(run?.state)) {
            const rec = await call(() => api('POST', `/v1/build-jobs/${b.jobId}/reconcile`, { token: admin, body: {} }));
            notes.push(`build ${b.jobId}: run ${job.run_id} ${run.state} but the job still held its reservation; reconcile answered ${rec.status} ${rec.body?.status ?? rec.body?.job?.status ?? ''}`);
          }
        }
        break;
      }
      await sleep(500);
    }
  }
}

/**
 * available + held + spent = granted, the audit finds no problem, and every build job let go of
 * its reservation (settled or released).
 * @param {ReturnType<typeof client>} api @param {string} admin @param {Array<{ jobId: string }>} builds
 */
async function checkLedger(api, admin, builds) {
  /** @type {Finding[]} */
  const out = [];
  const c = (await call(() => api('GET', '/v1/credits', { token: admin }))).body;
  if (c.available_cents + c.held_cents + c.spent_cents !== c.granted_cents) out.push({ kind: 'ledger_identity', ...pick(c, ['granted_cents', 'available_cents', 'held_cents', 'spent_cents']) });
  const audit = (await call(() => api('GET', '/v1/credits/audit', { token: admin }))).body;
  if (!audit.ok) out.push({ kind: 'ledger_audit', problems: audit.problems });
  for (const b of builds) {
    const job = (await call(() => api('GET', `/v1/build-jobs/${b.jobId}`, { token: admin }))).body;
    if (job?.status !== 'settled' && job?.status !== 'released') out.push({ kind: 'build_job_still_held', job: b.jobId, status: job?.status, run: job?.run_id });
  }
  return out;
}

/** @param {Record<string, any>} o @param {string[]} keys */
function pick(o, keys) {
  return Object.fromEntries(keys.map((k) => [k, o[k]]));
}

/** @param {string[]} xs */
function countBy(xs) {
  /** @type {Record<string, number>} */
  const out = {};
  for (const x of xs) out[x] = (out[x] ?? 0) + 1;
  return out;
}

export { summary };
