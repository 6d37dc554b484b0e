// Lifecycle throughput (docs/BENCHMARKS.md): runs per second from dispatch to completed with 1,
// 4 and 16 concurrent runners, and HTTP requests per completed run. Simulated runners speak the
// runner protocol over HTTP: a claim long-poll, launched, one phase report with output lines and
// the final report with an artifact (the daemon's calls, with the run-attempt token). Each runner
// count gets an organization of its own; the runners wait on the long-poll before the first
// dispatch, and a dispatcher sends all runs, `dispatchConcurrency` at a time.
import { claim, createOrg, dispatch, registerMachines, runToCompletion } from './lib/docket.mjs';
import { client, ignoreAbort, pool, sleep } from './lib/http.mjs';
import { RUNNER_LABELS } from './lib/seed.mjs';
import { summarize } from './lib/stats.mjs';

/**
 * @param {string} url a running Docket
 * @param {{ runnerCounts: number[], runs: number, dispatchConcurrency: number, claimWaitMs: number, timeoutMs: number }} cfg
 * @param {(line: string) => void} say
 */
export async function lifecycle(url, cfg, say) {
  const rows = [];
  for (const runners of cfg.runnerCounts) {
    const setup = client(url);
    const org = await createOrg(setup, `bench-lifecycle-${runners}`);
    const machines = await registerMachines(setup, org.admin, runners, RUNNER_LABELS);
    const counter = { requests: 0 };
    const api = client(url, counter);

    /** @type {Map<string, number>} */
    const dispatchedAt = new Map();
    /** @type {number[]} */
    const runMs = [];
    let completed = 0;
    let lastCompletedAt = 0;
    let allDone = () => {};
    const done = new Promise((resolve) => (allDone = () => resolve(undefined)));
    const stop = new AbortController();
    /** @type {unknown} */
    let failure = null;

    const runner = async (/** @type {string} */ token) => {
      try {
        while (!stop.signal.aborted) {
          const res = await claim(api, token, cfg.claimWaitMs, stop.signal).catch(ignoreAbort);
          if (res?.status !== 200) continue;
          const state = await runToCompletion(api, token, res.body);
          if (state !== 'completed') throw new Error(`run ${res.body.run_id} ended ${state}, not completed`);
          const now = performance.now();
          // The run may complete before its dispatch answer came back: measured once both are known.
          const t0 = dispatchedAt.get(res.body.run_id);
          if (t0 !== undefined) runMs.push(now - t0);
          else dispatchedAt.set(res.body.run_id, -now);
          lastCompletedAt = now;
          if (++completed === cfg.runs) allDone();
        }
      } catch (e) {
        failure ??= e;
        allDone();
      }
    };

    const loops = machines.map((m) => runner(m.token));
    await sleep(500); // every runner is waiting on the long-poll
    const started = performance.now();
    try {
      await pool(cfg.runs, cfg.dispatchConcurrency, async () => {
        const t0 = performance.now();
        const id = await dispatch(api, org.admin, { labels: RUNNER_LABELS });
        const finished = dispatchedAt.get(id);
        if (finished !== undefined) runMs.push(-finished - t0);
        else dispatchedAt.set(id, t0);
      });
      const timer = setTimeout(() => {
        failure ??= new Error(`${cfg.runs - completed} of ${cfg.runs} runs did not complete within ${cfg.timeoutMs} ms`);
        allDone();
      }, cfg.timeoutMs);
      await done;
      clearTimeout(timer);
    } finally {
      stop.abort();
      await Promise.allSettled(loops);
    }
    if (failure) throw failure;
    const seconds = (lastCompletedAt - started) / 1000;
    const row = {
      runners,
      runs: cfg.runs,
      seconds,
      runs_per_s: cfg.runs / seconds,
      requests: counter.requests,
      requests_per_run: counter.requests / cfg.runs,
      dispatch_to_completed_ms: summarize(runMs),
    };
    say(`  ${runners} runner(s): ${cfg.runs} runs in ${seconds.toFixed(1)} s, ${row.runs_per_s.toFixed(1)} runs/s, ${row.requests_per_run.toFixed(2)} requests per run`);
    rows.push(row);
  }
  return { dispatch_concurrency: cfg.dispatchConcurrency, rows };
}
