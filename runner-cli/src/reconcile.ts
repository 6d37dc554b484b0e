// Startup reconciliation: every job the job database has not seen end is asked about at the server
// before anything is claimed, and its sandbox resumed, stopped or left, as the answer says.
import { join } from 'node:path';
import { errorText } from './api.js';
import type { CallResult } from './job-attempt.js';
import type { JobHost } from './job-host.js';
import { JobSupervisor } from './job.js';
import type { JobRow } from './jobs.js';
import { jobPaths, readJson, removeWorkDir } from './launchers/common.js';
import type { Sandbox } from './launchers/launcher.js';
import { sleep } from './procs.js';

const RECONCILE_TRIES = 3;

/** What reconciliation needs of the runner: a job's host, and its tracking of the jobs it resumes. */
export interface ReconcileHost extends JobHost {
  track(sup: JobSupervisor, work: Promise<void>): void;
}

/**
 * Startup reconciliation (shared/spec/build-lifecycle.md, "Recover without duplicating spend";
 * DESIGN.md, "Protocol essentials"): ask the server about each job that is not done, resume the
 * lease where the attempt is still ours, remove a sandbox only on a definitive code, and
 * otherwise mark the job `reconcile`.
 */
export async function reconcileAll(runner: ReconcileHost) {
  const rows = runner.db.unfinished();
  if (rows.length === 0) return;
  runner.out.emit('reconciling', `reconciling ${rows.length} unfinished job(s)`, { jobs: rows.length });
  for (const row of rows) {
    if (runner.stopping) return;
    try {
      await reconcileOne(runner, row);
    } catch (e) {
      runner.out.run('reconcile', { run_id: row.run_id, attempt: row.attempt }, `reconciliation failed: ${errorText(e)}`, { error: errorText(e) });
    }
  }
}

async function reconcileOne(runner: ReconcileHost, row: JobRow) {
  const view = { run_id: row.run_id, attempt: row.attempt, phase: row.phase };
  if (row.state === 'cost-review') return closeCostReview(runner, row);
  if (row.state === 'queued' || row.state === 'running') {
    runner.db.transition(row.run_id, row.attempt, 'interrupted', { reason: 'the listener that ran it is gone' });
  }
  const claim = JSON.parse(row.launch_json);
  const sup = new JobSupervisor(runner, runner.db.get(row.run_id, row.attempt)!, claim);
  const launcher = runner.launchers[row.protocol] ?? runner.launchers.process;
  const paths = jobPaths(runner.cfg.data_dir, row.run_id, row.attempt);
  // Asked even with no sandbox recorded: a runner killed between the launch and its record may
  // have left one the launcher can find by the attempt's own marks (a container's labels).
  const sandbox = await launcher.adopt(row, paths);
  sup.sandbox = sandbox;

  const backoff = runner.backoff();
  let r: CallResult = await sup.call('lease');
  for (let i = 1; i < RECONCILE_TRIES && r.kind === 'transient' && !runner.stopping; i++) {
    await sleep(backoff.fail(), runner.stopSignal);
    r = await sup.call('lease');
  }
  if (r.kind === 'upgrade') return;
  if (r.kind === 'definitive' && (await endedWhileAway(sup, sandbox))) {
    // The run ended by its own daemon's final report while no listener watched: record that end.
    return sup.finishExited(sandbox ? await sandbox.exited : { code: null, signal: null });
  }
  if (r.kind !== 'ok') {
    if (r.kind === 'transient') {
      return sup.park('reconcile', `the server could not be asked (${errorText(r.error)}); the sandbox was left as it is`);
    }
    return sup.afterRefusal(r, { atStartup: true });
  }
  const state = r.body?.state;
  if (state === 'claimed') {
    if (sandbox) return runner.track(sup, sup.resume(sandbox, { launchedAccepted: false }));
    removeWorkDir(paths);
    return sup.launchFailed('the runner restarted before the sandbox was launched');
  }
  if (r.body?.stop_requested) {
    runner.out.run('stop_requested', view, 'the server asked to stop this run');
    if (sandbox) return sup.stopAndReport('stop requested');
    return sup.reportStopped('stop requested; the sandbox was already gone');
  }
  if (sandbox) return runner.track(sup, sup.resume(sandbox, { launchedAccepted: true }));
  // The sandbox ended while no listener watched it: the daemon's final.json says how.
  return sup.finishExited({ code: null, signal: null });
}

/**
 * A job in cost-review ended with its final report accepted, so its run's end and cost are the
 * server's (a budgeted run's reservation waits for an admin's cost review there). Here it is a
 * record: said once more at this start, then done, its outcome and the review's reason kept for
 * `status` (runner-cli/README.md, "The job database and restarts").
 */
function closeCostReview(runner: ReconcileHost, row: JobRow) {
  const cost = row.cost_cents === null ? 'an unknown cost' : `a cost of ${row.cost_cents} cents`;
  const reason = `cost review: ${row.reason ?? 'the reported cost was uncertain or above the review threshold'}`;
  runner.db.transition(row.run_id, row.attempt, 'done', { reason }, 'cost review noted at a listener start');
  runner.out.run('cost_review', { run_id: row.run_id, attempt: row.attempt, phase: row.phase },
    `ended ${row.outcome ?? 'unknown'} with ${cost} that needs review; recorded as done (\`docket-runner status\` keeps the reason)`,
    { outcome: row.outcome, cost_cents: row.cost_cents, reason });
}

/**
 * Whether the daemon delivered its final report (final.json says so) and its sandbox is gone or
 * going: then a task_gone at startup is the run's own end, not a workload to destroy.
 */
async function endedWhileAway(sup: JobSupervisor, sandbox: Sandbox | null) {
  if (sandbox) return sup.endedByItsDaemon(sandbox);
  return readJson(join(sup.paths.stateDir, 'final.json'))?.delivered === true;
}
