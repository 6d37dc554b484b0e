// Dispatch-to-claim latency (docs/BENCHMARKS.md): idle runners already waiting on the claim
// long-poll, beside a runner that polls every second, measured in the same run. Each sample
// dispatches one run to each of two organizations at the same moment: one whose runners wait on
// the long-poll, one whose runner polls. Latency runs from just before the dispatch request is
// sent to the moment the claim's answer reaches the runner.
import { claim, createOrg, dispatch, registerMachines } from './lib/docket.mjs';
import { client, ignoreAbort, sleep } from './lib/http.mjs';
import { RUNNER_LABELS } from './lib/seed.mjs';
import { round, summarize } from './lib/stats.mjs';

/**
 * @param {string} url a running Docket
 * @param {{ samples: number, waitingRunners: number, pollIntervalMs: number, claimWaitMs: number }} cfg
 * @param {(line: string) => void} say
 */
export async function dispatchToClaim(url, cfg, say) {
  const api = client(url);
  const waitingOrg = await createOrg(api, 'bench-latency-waiting');
  const pollingOrg = await createOrg(api, 'bench-latency-polling');
  const waiting = await registerMachines(api, waitingOrg.admin, cfg.waitingRunners, RUNNER_LABELS);
  const [poller] = await registerMachines(api, pollingOrg.admin, 1, RUNNER_LABELS);

  /** When each claimed run reached its runner. @type {Map<string, number>} */
  const claimedAt = new Map();
  /** @type {Map<string, () => void>} */
  const onClaim = new Map();
  const arrived = (/** @type {string} */ runId) => {
    claimedAt.set(runId, performance.now());
    onClaim.get(runId)?.();
  };
  const stop = new AbortController();
  /** @type {unknown} */
  let failure = null;
  const loop = async (/** @type {string} */ token, /** @type {number} */ waitMs, /** @type {number} */ pauseMs) => {
    try {
      while (!stop.signal.aborted) {
        const res = await claim(api, token, waitMs, stop.signal).catch(ignoreAbort);
        if (res?.status === 200) arrived(res.body.run_id);
        else if (pauseMs > 0) await sleep(pauseMs);
      }
    } catch (e) {
      failure ??= e;
    }
  };
  const loops = [...waiting.map((m) => loop(m.token, cfg.claimWaitMs, 0)), loop(poller.token, 0, cfg.pollIntervalMs)];

  const longPoll = [];
  const polling = [];
  const dispatchMs = [];
  try {
    await sleep(1_000); // the waiting runners are parked in the scheduler
    for (let i = 0; i < cfg.samples; i++) {
      const t0 = performance.now();
      const [a, b] = await Promise.all([timedDispatch(api, waitingOrg.admin), timedDispatch(api, pollingOrg.admin)]);
      dispatchMs.push(a.ms, b.ms);
      await Promise.all([a.id, b.id].map((id) => claimed(id, claimedAt, onClaim, cfg.pollIntervalMs + 10_000))).catch((e) => {
        throw failure ?? e;
      });
      longPoll.push(claimedAt.get(a.id) - t0);
      polling.push(claimedAt.get(b.id) - t0);
      if ((i + 1) % 10 === 0 || i + 1 === cfg.samples) say(`  ${i + 1} of ${cfg.samples} samples`);
      await sleep(50 + Math.random() * 250); // the poller's phase differs from sample to sample
    }
  } finally {
    stop.abort();
    await Promise.allSettled(loops);
  }
  if (failure) throw failure;
  return {
    waiting_runners: cfg.waitingRunners,
    poll_interval_ms: cfg.pollIntervalMs,
    long_poll_ms: summarize(longPoll),
    polling_ms: summarize(polling),
    dispatch_request_ms: summarize(dispatchMs),
    // Every sample, for the distribution chart (bench/charts.mjs).
    long_poll_samples_ms: longPoll.map((v) => round(v, 1)),
    polling_samples_ms: polling.map((v) => round(v, 1)),
  };
}

/** @param {ReturnType<typeof client>} api @param {string} admin */
async function timedDispatch(api, admin) {
  const t = performance.now();
  const id = await dispatch(api, admin, { labels: RUNNER_LABELS });
  return { id, ms: performance.now() - t };
}

/** Resolves once `runId` was claimed. */
function claimed(runId, claimedAt, onClaim, timeoutMs) {
  if (claimedAt.has(runId)) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`run ${runId} was not claimed within ${timeoutMs} ms`)), timeoutMs);
    onClaim.set(runId, () => {
      clearTimeout(timer);
      onClaim.delete(runId);
      resolve(undefined);
    });
  });
}
