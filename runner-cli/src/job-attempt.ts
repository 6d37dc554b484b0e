// A job's attempt as the runner holds it: its row, the attempt-scoped calls (classified by api.ts
// classify(), so only definitive codes destroy a workload), and how an attempt is closed: stopped,
// launch failed, refused, parked or finished. job-end.ts and job.ts build on it.
import { type AttemptCall, type AttemptCallBodies, classify, errorText, type RequestOptions, retryDelayMs } from './api.js';
import { jobPaths, removeWorkDir } from './launchers/common.js';
import { sleep } from './procs.js';
import type { JobRow } from './jobs.js';
import type { JobPaths, Sandbox } from './launchers/launcher.js';
import type { JobHost } from './job-host.js';

/** How many times a closing call (launch-failed, stopped) is tried before the job goes to `reconcile`. */
const CLOSING_CALL_TRIES = 6;
const DEFAULT_LIFETIME_MS = 600_000;

export type CallResult = { kind: 'ok'; body: any } | { kind: 'definitive' | 'attempt_over' | 'upgrade' | 'transient'; error: any };

export class JobAttempt {
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
