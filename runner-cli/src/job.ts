// One job (run attempt) on this machine: launch, hold the lease, honour stop requests and the
// sandbox lifetime. shared/spec/dispatch-lifecycle.md is the behaviour; how the attempt's calls are
// made and closed is job-attempt.ts, how it ends job-end.ts, its waiting lease call job-lease.ts.
import { errorText, retryDelayMs } from './api.js';
import { GitError } from './git.js';
import type { CallResult } from './job-attempt.js';
import { JobEnding } from './job-end.js';
import { LeaseWaits, movedOnState } from './job-lease.js';
import { CheckpointUnusable, LaunchError } from './launchers/common.js';
import { LauncherRefused, type LaunchRequest, type Sandbox } from './launchers/launcher.js';
import { sleep } from './procs.js';

const TICK_MS = 500;
/** The shortest time between the starts of two lease calls of one job, however fast they are answered. */
const LEASE_CALL_MIN_GAP_MS = 1_000;

export class JobSupervisor extends JobEnding {
  /** A freshly claimed job: launch it and supervise it to its end. */
  async runClaimed() {
    const claim = this.claim;
    this.db.update(this.runId, this.attempt, { job_dir: this.paths.jobDir, work_dir: this.paths.workDir });
    const brief = String(claim.brief ?? '').split('\n')[0].slice(0, 80);
    this.out.run('claimed', this.view, `claimed${brief ? `: ${brief}` : ''}`, { protocol: claim.launch?.protocol ?? 'process' });
    if (claim.publication) return this.pushOnly();
    const protocol = claim.launch?.protocol ?? 'process';
    const launcher = this.runner.cfg.launchers.includes(protocol) ? this.runner.launchers[protocol] : null;
    if (!launcher) return this.launchFailed(`launch protocol ${protocol} is not served by this runner`);

    // Keep the lease while the checkout runs; a stop request or a definitive answer aborts the launch.
    const launchCtl = new AbortController();
    const lease = this.keepLeaseWhileLaunching(launchCtl);
    const started = Date.now();
    this.out.run('launching', this.view, claim.repository ? `launching (checking out ${claim.repository.url} at ${claim.repository.commit ?? 'HEAD'})` : 'launching');
    try {
      this.sandbox = await launcher.launch(this.launchRequest(launchCtl.signal));
    } catch (e) {
      launchCtl.abort();
      await lease.done;
      const i = lease.interruption();
      if (i?.kind === 'ok') return this.reportStopped('a stop was requested before the sandbox launched');
      if (i) return this.afterRefusal(i);
      if (e instanceof CheckpointUnusable) return this.checkpointUnusable(e.message);
      if (e instanceof LauncherRefused) {
        // Every launch would be refused the same: this one is a launch failure, and no more are claimed.
        this.runner.launcherRefused(e.message);
        return this.launchFailed(e.message);
      }
      const message = e instanceof LaunchError || e instanceof GitError ? e.message : `launch failed: ${errorText(e)}`;
      return this.launchFailed(message);
    }
    launchCtl.abort();
    await lease.done;
    this.launchedAtMs = Date.now();
    this.startedAtMs = this.launchedAtMs;
    this.move('running', {
      sandbox_id: this.sandbox.id,
      sandbox_pid: this.sandbox.pid,
      sandbox_start_ticks: this.sandbox.startTicks,
      launched_at_ms: this.launchedAtMs,
      lifetime_ms: this.lifetimeMs,
    });
    this.out.run('launched', this.view, `launched sandbox ${this.sandbox.id} in ${Date.now() - started} ms`, { sandbox_id: this.sandbox.id });
    const i = lease.interruption();
    if (i) return i.kind === 'ok' ? this.stopAndReport('a stop was requested') : this.afterRefusal(i);
    return this.supervise({ launchedAccepted: false, informed: true });
  }

  /**
   * The lease kept while the sandbox launches: a stop request or an answer that ends the attempt
   * aborts the launch through `launchCtl`, and `interruption()` is that answer.
   */
  keepLeaseWhileLaunching(launchCtl: AbortController) {
    let interruption: CallResult | null = null;
    const done = (async () => {
      const backoff = this.runner.backoff();
      let waitMs = this.leaseRefreshMs;
      while (!launchCtl.signal.aborted) {
        await sleep(waitMs, launchCtl.signal);
        if (launchCtl.signal.aborted) return;
        const r = await this.call('lease');
        if (r.kind === 'ok' && !r.body?.stop_requested) {
          backoff.succeed();
          waitMs = this.leaseRefreshMs;
        } else if (r.kind === 'transient') {
          // Retry-After is honoured up to the refresh interval: keeping the lease comes first.
          waitMs = Math.min(retryDelayMs(r.error, backoff.fail()), this.leaseRefreshMs);
        } else {
          interruption = r;
          launchCtl.abort();
        }
      }
    })();
    return { done, interruption: () => interruption };
  }

  /** What the launcher is asked for: the claim, the job's files, and the daemon's variables. */
  launchRequest(signal: AbortSignal): LaunchRequest {
    const claim = this.claim;
    return {
      claim,
      paths: this.paths,
      docketEnv: {
        DOCKET_URL: this.runner.cfg.server_url,
        DOCKET_RUN_ID: this.runId,
        DOCKET_ATTEMPT: String(this.attempt),
        DOCKET_ATTEMPT_TOKEN: claim.attempt_token,
      },
      passEnv: this.runner.cfg.pass_env,
      checkoutTimeoutMs: Math.max(30_000, (claim.launch_deadline_at_ms ?? 0) - Date.now() - 5_000),
      handshakeTimeoutMs: 30_000,
      lifetimeMs: this.lifetimeMs,
      recordSandbox: (id) => this.db.update(this.runId, this.attempt, { sandbox_id: id }),
      signal,
    };
  }

  /**
   * A job found after a restart whose attempt is still ours, with its sandbox running.
   */
  async resume(sandbox: Sandbox, opts: { launchedAccepted: boolean }) {
    this.sandbox = sandbox;
    this.move('running', { sandbox_id: sandbox.id }, 'resumed after a restart');
    this.out.run('resumed', this.view, `resumed the lease of sandbox ${sandbox.id}`, { sandbox_id: sandbox.id });
    // A pause recorded while this runner was down is acted on at once, not after a lease wait.
    return this.supervise({ ...opts, informed: false });
  }

  /**
   * The lease loop: one waiting `launched` or `lease` call in flight at a time (docs/protocol.md,
   * "Lease waits"), answered at the refresh interval or at once on a stop request, while this loop
   * watches the sandbox, its lifetime and phase. `informed`: this runner has seen the attempt's
   * directives as they stand (see LeaseWaits).
   */
  async supervise({ launchedAccepted, informed }: { launchedAccepted: boolean; informed: boolean }) {
    const sandbox = this.sandbox as Sandbox;
    const deadlineAtMs = (this.launchedAtMs ?? Date.now()) + this.lifetimeMs;
    const backoff = this.runner.backoff();
    const lease = new LeaseWaits(this, informed);
    let nextCallAtMs = 0;
    let exited = false;
    sandbox.exited.then(() => (exited = true));
    try {
      for (;;) {
        this.pollPhase();
        if (exited || !sandbox.running()) return this.finishExited(await sandbox.exited);
        if (this.runner.stopping) return this.leaveRunning();
        const now = Date.now();
        if (now >= deadlineAtMs) {
          return this.stopAndReport(`the sandbox lifetime of ${Math.round(this.lifetimeMs / 100) / 10} s ran out`);
        }
        const answer = lease.take();
        if (answer) {
          const { call, r, startedAtMs } = answer;
          if (r.kind === 'ok') {
            launchedAccepted = true;
            backoff.succeed();
            // The wait paced this call; a call answered at once is not repeated within the gap.
            nextCallAtMs = startedAtMs + LEASE_CALL_MIN_GAP_MS;
            if (r.body?.stop_requested) {
              this.out.run('stop_requested', this.view, 'the server asked to stop this run');
              return this.stopAndReport('stop requested');
            }
            if (r.body?.pause_requested) await this.askToCheckpoint(sandbox);
          } else if (movedOnState(r)) {
            // The expected end of a pause (or a blocker), not a failure: the daemon's final.json says how it went.
            return this.afterRunMovedOn(sandbox, movedOnState(r)!);
          } else if (r.kind === 'transient') {
            const delay = Math.min(retryDelayMs(r.error, backoff.fail()), this.leaseRefreshMs);
            nextCallAtMs = Date.now() + delay;
            this.out.run('lease_retry', this.view, `${call} failed (${errorText(r.error)}); retrying in ${delay} ms`, { error: errorText(r.error) });
          } else if (r.kind === 'upgrade') {
            continue; // the runner is stopping; the next turn leaves the sandbox running
          } else if (r.kind === 'definitive' && (await this.endedByItsDaemon(sandbox))) {
            return this.finishExited(await sandbox.exited);
          } else {
            return this.afterRefusal(r);
          }
        }
        if (!lease.inFlight && Date.now() >= nextCallAtMs) lease.start(launchedAccepted ? 'lease' : 'launched', sandbox.id);
        const waitMs = Math.max(0, Math.min(TICK_MS, deadlineAtMs - Date.now(), lease.inFlight ? TICK_MS : nextCallAtMs - Date.now()));
        // The last call's answer settled long ago when none is in flight: racing it would spin until the next call is due.
        await Promise.race([sleep(waitMs, this.runner.stopSignal), sandbox.exited, ...(lease.inFlight ? [lease.answered] : [])]);
      }
    } finally {
      lease.abandon();
    }
  }

  /**
   * The run is pausing: the daemon is asked once (SIGUSR1) to have the agent checkpoint; the lease
   * goes on until the sandbox exits with the checkpoint uploaded (runner-cli/README.md, "Pause").
   */
  async askToCheckpoint(sandbox: Sandbox) {
    if (this.pauseAsked) return;
    this.pauseAsked = true;
    const sent = await sandbox.signal('SIGUSR1');
    this.out.run('pause_requested', this.view, sent ? 'the server asked to pause: the daemon is checkpointing' : 'the server asked to pause, but the daemon could not be signalled');
  }
}
