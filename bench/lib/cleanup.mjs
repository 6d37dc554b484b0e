// Whatever the benchmark starts it stops, also when it is interrupted (Ctrl-C, SIGTERM) or runs
// past its time limit: the actions registered here run on exit. Local Workers are stopped by
// wrangler's own exit hook; these remove temp directories and kill runner processes.

/** @type {Set<() => void>} */
const actions = new Set();

/** Runs `action` (synchronous) when the process exits; the answer unregisters it. @param {() => void} action */
export function atExit(action) {
  actions.add(action);
  return () => actions.delete(action);
}

process.on('exit', () => {
  for (const action of actions) {
    try {
      action();
    } catch {
      // keep cleaning up
    }
  }
});
process.on('SIGINT', () => process.exit(130));
process.on('SIGTERM', () => process.exit(143));

/** Ends the process (cleaning up) if it is still running after `ms`. @param {number} ms */
export function limitRunTime(ms) {
  setTimeout(() => {
    console.error(`the benchmark ran past its limit of ${ms / 1000} s (BENCH_TIMEOUT_MS); stopping`);
    process.exit(1);
  }, ms).unref();
}
