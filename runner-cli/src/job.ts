// One job (run attempt) on this machine: launch, hold the lease, honour stop requests and the
// sandbox lifetime, and say how it ended. shared/spec/dispatch-lifecycle.md is the behaviour; every
// server answer goes through api.ts classify(), so only definitive codes destroy a workload.
import { join } from 'node:path';
import { type AttemptCall, type AttemptCallBodies, classify, errorText, type RequestOptions, retryDelayMs } from './api.js';
import { GitError } from './git.js';
import { publish, publishPatch } from './publish.js';
import { CheckpointUnusable, jobPaths, LaunchError, readJson, removeWorkDir } from './launchers/common.js';
import { sleep } from './procs.js';
import type { JobRow } from './jobs.js';
import type { JobPaths, LaunchRequest, Sandbox } from './launchers/launcher.js';
import type { JobHost } from './job-host.js';

/** How many times a closing call (launch-failed, stopped) is tried before the job goes to `reconcile`. */
const CLOSING_CALL_TRIES = 6;
const TICK_MS = 500;
/** How long a sandbox whose run just ended gets to exit by itself before it is removed. */
const ENDING_WAIT_MS = 5_000;
/** How long a sandbox whose daemon's own call paused or blocked the run gets to exit by itself before it is stopped. */
const MOVED_ON_EXIT_WAIT_MS = 30_000;
/**
 * Run states in which the server refuses the lease (409 invalid_transition) because the daemon's
 * own call ended the attempt's work: a stored checkpoint (paused), a final report with a blocker (blocked).
 */
const MOVED_ON_STATES = new Set(['paused', 'blocked']);
const DEFAULT_LIFETIME_MS = 600_000;
/** The shortest time between the starts of two lease calls of one job, however fast they are answered. */
const LEASE_CALL_MIN_GAP_MS = 1_000;
/** The most one git command of a publication (clone, commit, push) may take. */
const PUBLISH_GIT_TIMEOUT_MS = 120_000;

export type CallResult = { kind: 'ok'; body: any } | { kind: 'definitive' | 'attempt_over' | 'upgrade' | 'transient'; error: any };

export class JobSupervisor {
  runner: JobHost;
  runId: string;
  attempt: number;
  /** The claim answer (run_id, attempt, lease and launch fields). */
  claim: any;
  paths: JobPaths;
  sandbox: Sandbox | null;
  phase: string | null;
  startedAtMs: number;
  leaseRefreshMs: number;
  lifetimeMs: number;
  launchedAtMs: number | null;
  /** The daemon was asked to checkpoint (once per attempt). */
  pauseAsked = false;
  /**
   * @param row the job's database row
   * @param claim the claim answer (run_id, attempt, lease and launch fields)
   */
  constructor(runner: JobHost, row: JobRow, claim: any) {
    this.runner = runner;
    this.runId = row.run_id;
    this.attempt = row.attempt;
    this.claim = claim;
    this.paths = jobPaths(runner.cfg.data_dir, this.runId, this.attempt);
    this.sandbox = null;
    this.phase = row.phase ?? null;
    this.startedAtMs = row.launched_at_ms ?? row.claimed_at_ms;
    this.leaseRefreshMs = claim.lease_refresh_ms ?? runner.serverConfig.lease_refresh_ms ?? 20_000;
    this.lifetimeMs = row.lifetime_ms ?? effectiveLifetimeMs(runner.cfg.sandbox_lifetime_ms, claim.sandbox_lifetime_ms);
    this.launchedAtMs = row.launched_at_ms ?? null;
  }

  get db() {
    return this.runner.db;
  }
  get out() {
    return this.runner.out;
  }

  /** For output lines. */
  get view() {
    return { run_id: this.runId, attempt: this.attempt, phase: this.phase, started_at_ms: this.startedAtMs };
  }

  move(to: string, patch: Record<string, any> = {}, note?: string) {
    return this.db.transition(this.runId, this.attempt, to, patch, note);
  }

  /**
   * One attempt-scoped call, classified.
   */
  async call<C extends AttemptCall>(call: C, body?: AttemptCallBodies[C], opts: RequestOptions = {}): Promise<CallResult> {
    try {
      const res = await this.runner.client.attemptCall(this.runId, this.attempt, call, body, opts);
      if (res.body?.lease_expires_at_ms) this.db.update(this.runId, this.attempt, { lease_expires_at_ms: res.body.lease_expires_at_ms });
      return { kind: 'ok', body: res.body };
    } catch (e) {
      const kind = classify(e);
      if (kind === 'upgrade') this.runner.upgradeRequired(e);
      // `launched` twice is harmless: an earlier try went through and only its answer was lost.
      if (call === 'launched' && (e as any).code === 'invalid_transition') return { kind: 'ok', body: (e as any).body };
      return { kind, error: e };
    }
  }

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

  /** A continuation's checkpoint did not verify: the server puts the run back to paused with the reason. */
  async checkpointUnusable(reason: string) {
    this.out.run('checkpoint_unusable', this.view, `the checkpoint did not verify: ${reason}`, { reason });
    const r = await this.closingCall('checkpoint-unusable', { reason: reason.slice(0, 4_000) });
    if (r === null) return;
    if (r.kind === 'ok') {
      removeWorkDir(this.paths);
      return this.finish('checkpoint_unusable', reason);
    }
    return this.afterRefusal(r, { alreadyStopped: true });
  }

  /**
   * A run that went terminal because the daemon delivered its final report is not a workload to
   * destroy: give the sandbox a moment to exit on its own and let final.json tell.
   */
  async endedByItsDaemon(sandbox: Sandbox) {
    const exited = await Promise.race([sandbox.exited.then(() => true), sleep(ENDING_WAIT_MS).then(() => false)]);
    return exited && readJson(join(this.paths.stateDir, 'final.json'))?.delivered === true;
  }

  /**
   * The server refused the lease because the run is paused or blocked: the daemon's checkpoint or
   * final report did that, and the sandbox exits by itself once the daemon has its answer. The job
   * ends as final.json says; a sandbox that does not exit in time is stopped (its files kept).
   */
  async afterRunMovedOn(sandbox: Sandbox, state: string) {
    const waited = new AbortController();
    const exited = await Promise.race([
      sandbox.exited.then(() => true),
      sleep(MOVED_ON_EXIT_WAIT_MS, AbortSignal.any([waited.signal, this.runner.stopSignal])).then(() => false),
    ]);
    waited.abort();
    if (!exited && this.runner.stopping) return this.leaveRunning();
    const final = readJson(join(this.paths.stateDir, 'final.json'));
    if (exited && (final?.checkpoint_delivered || final?.delivered)) return this.finishExited(await sandbox.exited);
    if (!exited) {
      this.out.run('stopping', this.view, `the run is ${state} but its sandbox did not exit: stopping it (files kept)`, { state });
      await sandbox.stop(this.runner.cfg.stop_grace_ms);
    }
    const how = exited ? 'the sandbox ended without saying how' : 'the sandbox did not exit by itself and was stopped';
    return this.finish(state, `the run is ${state} on the server; ${how}`);
  }

  /** Print a phase change the daemon wrote to its status file. */
  pollPhase() {
    const status = readJson(join(this.paths.stateDir, 'status.json'));
    if (status?.phase && status.phase !== this.phase) {
      this.phase = status.phase;
      this.db.update(this.runId, this.attempt, { phase: this.phase });
      this.out.run('phase', this.view, `phase ${this.phase}`);
    }
  }

  /**
   * The sandbox ended on its own. The daemon says in final.json whether its final report got through.
   */
  async finishExited(exit: { code: number | null; signal: string | null }) {
    this.pollPhase();
    const final = readJson(join(this.paths.stateDir, 'final.json'));
    if (final?.checkpoint_delivered) {
      const state = final.answer_state ?? 'paused';
      // A stop request pending at the pause makes the stored checkpoint cancel the run instead.
      this.finish('paused', state === 'paused' ? 'checkpoint stored' : `checkpoint stored; the run is ${state}`);
      removeWorkDir(this.paths); // the work is on the server as the checkpoint's patch
      return;
    }
    if (final?.delivered) {
      let outcome = final.answer_state ?? final.outcome;
      if (outcome === 'publishing') {
        // The run waits for this push (its lease is this job's): it comes before anything else.
        if (!(await this.pushWork(() => publish(this.runner.client, this.publishJob())))) return;
        outcome = 'pushed';
      }
      const costReview = final.cost_uncertain === true || this.aboveCostThreshold(final.cost_cents);
      const reason = final.outcome === 'failed' ? `the agent failed (exit codes ${JSON.stringify(final.exit_codes)})` : null;
      if (costReview) {
        this.move('cost-review', { outcome, cost_cents: final.cost_cents ?? null, ended_at_ms: Date.now(), reason: 'the reported cost is uncertain or above the review threshold' });
        this.out.run('cost_review', this.view, `ended ${outcome}; the cost needs review`, { outcome, cost_cents: final.cost_cents ?? null });
        return;
      }
      this.finish(outcome, reason, { cost_cents: final.cost_cents ?? null });
      removeWorkDir(this.paths); // the patch is on the server; logs stay
      return;
    }
    if (final?.attempt_over) {
      return this.finish('lost', `the daemon was told ${final.attempt_over}; this attempt is over`);
    }
    const code = exit.code ?? (final?.exit_codes ? JSON.stringify(final.exit_codes) : 'unknown');
    const why = final?.error ? `: ${final.error}` : '';
    return this.reportStopped(`the sandbox exited (code ${code}) without delivering a final report${why}`);
  }

  publishJob() {
    return { runId: this.runId, attempt: this.attempt, workDir: this.paths.workDir, cloneDir: this.paths.publishDir, timeoutMs: PUBLISH_GIT_TIMEOUT_MS };
  }

  /** A publication continuation's push-only job: the stored patch at its revision, pushed; no agent runs. */
  async pushOnly() {
    const p = this.claim.publication;
    this.out.run('publishing', this.view, `push-only job: applying the stored patch at ${p.source_revision ?? 'HEAD'}`);
    removeWorkDir(this.paths);
    if (await this.pushWork(() => publishPatch(this.runner.client, { ...this.publishJob(), sourceRevision: p.source_revision, patch: p.patch }))) {
      this.finish('pushed', null);
      removeWorkDir(this.paths);
    }
  }

  /**
   * Pushes the publication branch and reports it; true when that was done. A refusal is handled
   * like any attempt call's; a push that failed is reported as stopped, which leaves the
   * publication paused and resumable.
   */
  async pushWork(push: () => Promise<{ branch: string; headSha: string; state: string }>): Promise<boolean> {
    try {
      const r = await push();
      this.out.run('pushed', this.view, `pushed ${r.headSha} to ${r.branch}; the run is ${r.state}`, { branch: r.branch, head_sha: r.headSha });
      return true;
    } catch (e) {
      const kind = classify(e);
      if (kind === 'definitive' || kind === 'attempt_over') await this.afterRefusal({ kind, error: e }, { alreadyStopped: true });
      else {
        this.out.run('push_failed', this.view, `the publication push failed: ${errorText(e)}`, { error: errorText(e) });
        await this.reportStopped(`the publication push failed: ${errorText(e)}`);
      }
      return false;
    }
  }

  aboveCostThreshold(costCents: number | null | undefined) {
    const limit = this.runner.cfg.cost_review_above_cents;
    return typeof limit === 'number' && typeof costCents === 'number' && costCents > limit;
  }

  /** Stop the sandbox (SIGTERM, grace, SIGKILL), then report `stopped`. */
  async stopAndReport(reason: string) {
    const sandbox = this.sandbox;
    if (sandbox) {
      this.out.run('stopping', this.view, `stopping the sandbox: ${reason}`, { reason });
      await sandbox.stop(this.runner.cfg.stop_grace_ms);
      this.out.run('sandbox_stopped', this.view, 'the sandbox stopped', { reason });
    }
    return this.reportStopped(reason);
  }

  async reportStopped(reason: string) {
    const r = await this.closingCall('stopped', { ...(this.sandbox ? { sandbox_id: this.sandbox.id } : {}), reason: reason.slice(0, 4_000) });
    if (r === null) return;
    if (r.kind === 'ok') {
      const state = r.body?.state ?? 'stopped';
      return this.finish(state, reason);
    }
    return this.afterRefusal(r, { alreadyStopped: true });
  }

  async launchFailed(error: string) {
    this.out.run('launch_failed', this.view, `launch failed: ${error}`, { error });
    const r = await this.closingCall('launch-failed', { error: error.slice(0, 4_000) });
    if (r === null) return;
    if (r.kind === 'ok') {
      const state = r.body?.state;
      return this.finish('launch_failed', state ? `${error} (the run is now ${state})` : error);
    }
    return this.afterRefusal(r, { alreadyStopped: true });
  }

  /**
   * A call that closes the attempt, retried on transient errors. Null when the job was parked
   * (reconcile or interrupted) because no answer came.
   */
  async closingCall<C extends 'stopped' | 'launch-failed' | 'checkpoint-unusable'>(call: C, body: AttemptCallBodies[C]) {
    const backoff = this.runner.backoff();
    let r: CallResult | null = null;
    for (let tryNo = 1; tryNo <= CLOSING_CALL_TRIES; tryNo++) {
      r = await this.call(call, body);
      if (r.kind !== 'transient') break;
      if (tryNo < CLOSING_CALL_TRIES && !this.runner.stopping) await sleep(retryDelayMs(r.error, backoff.fail()), this.runner.stopSignal);
      if (this.runner.stopping) break;
    }
    const res = r as CallResult;
    if (res.kind === 'transient' || res.kind === 'upgrade') {
      const why = `${call} could not be delivered: ${errorText(res.error)}`;
      this.park(res.kind === 'upgrade' ? 'interrupted' : 'reconcile', why);
      return null;
    }
    return res;
  }

  /**
   * The server refused the attempt. Definitive codes destroy the workload; stale_attempt and
   * lease_expired end this attempt's work but keep its files.
   */
  async afterRefusal(r: CallResult, { alreadyStopped = false, atStartup = false }: { alreadyStopped?: boolean; atStartup?: boolean } = {}) {
    const err = (r as any).error;
    const code = err?.code ?? 'unknown';
    if (r.kind === 'definitive') {
      this.out.run('destroying', this.view, `the server answered ${code}: removing the sandbox`, { code });
      if (this.sandbox) await this.sandbox.remove(this.runner.cfg.stop_grace_ms);
      else removeWorkDir(this.paths);
      // task_gone names how the run ended (completed, failed, cancelled): that is the job's outcome.
      const ended = code === 'task_gone' ? serverEnd(err) : null;
      return this.finish(ended ?? (code === 'task_gone' ? 'gone' : code), `${code}: ${err?.message ?? ''}`.trim());
    }
    if (r.kind === 'attempt_over') {
      if (this.sandbox && !alreadyStopped) {
        this.out.run('stopping', this.view, `the server answered ${code}: stopping this attempt's work (files kept)`, { code });
        await this.sandbox.stop(this.runner.cfg.stop_grace_ms);
      }
      const reason = `${code}: ${err?.message ?? ''}`.trim();
      if (atStartup) return this.park('reconcile', reason);
      return this.finish('lost', reason);
    }
    if (r.kind === 'upgrade') return this.park('interrupted', 'the server requires a newer runner');
    return this.park('reconcile', `unexpected answer: ${errorText(err)}`);
  }

  /** The listener is stopping: the sandbox keeps running for the next start's reconciliation. */
  leaveRunning() {
    this.park('interrupted', 'the listener stopped; the sandbox was left running');
  }

  park(state: 'interrupted' | 'reconcile', reason: string) {
    this.move(state, { reason });
    this.out.run(state, this.view, `${state === 'reconcile' ? 'needs reconciliation' : 'interrupted'}: ${reason}`, { reason });
  }

  finish(outcome: string, reason: string | null, patch: Record<string, any> = {}) {
    this.move('done', { outcome, reason: reason ?? undefined, ended_at_ms: Date.now(), ...patch });
    this.out.run('run_ended', this.view, `ended: ${outcome}${reason ? ` (${reason})` : ''}`, { outcome, reason });
  }
}

/** The state a lease refusal names when the daemon's own call moved the run on (MOVED_ON_STATES), or null. */
function movedOnState(r: CallResult): string | null {
  if (r.kind !== 'transient') return null;
  const state = r.error?.code === 'invalid_transition' ? r.error.body?.state : null;
  return MOVED_ON_STATES.has(state) ? state : null;
}

/**
 * The run's end as a task_gone refusal states it (its `state`), or null when it names none.
 * @param err an ApiError
 */
export function serverEnd(err: any) {
  const state = err?.body?.state;
  return state === 'completed' || state === 'failed' || state === 'cancelled' ? state : null;
}

/**
 * The server's sandbox lifetime, capped by the local setting when one is given.
 */
export function effectiveLifetimeMs(localMs: number | null | undefined, serverMs: number | null | undefined) {
  const server = typeof serverMs === 'number' && serverMs > 0 ? serverMs : DEFAULT_LIFETIME_MS;
  return typeof localMs === 'number' && localMs > 0 ? Math.min(localMs, server) : server;
}

/**
 * The one waiting `launched`/`lease` call of a running job (docs/protocol.md, "Lease waits"). Its
 * HTTP timeout is the wait plus the usual request timeout, as a claim's is; abandoning it (the
 * sandbox ended, the listener stops) aborts the request.
 */
class LeaseWaits {
  job: JobSupervisor;
  ctl = new AbortController();
  inFlight = false;
  /**
   * Whether the last answer was received, so no directive can have passed unseen. The server
   * answers a waiting call at once on a change, or when a stop is pending; a run already pausing is
   * no change, and would be learnt only when the wait ends. So after a restart, or a call that
   * failed (its answer may have carried the change), the next call does not wait.
   */
  informed: boolean;
  /** Settles when the call in flight is answered. */
  answered: Promise<void> = Promise.resolve();
  result: { call: 'launched' | 'lease'; r: CallResult; startedAtMs: number } | null = null;
  constructor(job: JobSupervisor, informed: boolean) {
    this.job = job;
    this.informed = informed;
  }

  start(call: 'launched' | 'lease', sandboxId: string) {
    const waitMs = this.informed ? this.job.leaseRefreshMs : 0;
    const body = call === 'launched' ? { sandbox_id: sandboxId, wait_ms: waitMs } : { wait_ms: waitMs };
    const startedAtMs = Date.now();
    this.inFlight = true;
    const opts = { signal: this.ctl.signal, timeoutMs: waitMs + this.job.runner.client.timeoutMs };
    this.answered = this.job.call(call, body, opts).then((r) => {
      this.inFlight = false;
      this.informed = r.kind === 'ok';
      this.result = { call, r, startedAtMs };
    });
  }

  /** The answer that came since the last take, once. */
  take() {
    const result = this.result;
    this.result = null;
    return result;
  }

  abandon() {
    this.ctl.abort();
  }
}
