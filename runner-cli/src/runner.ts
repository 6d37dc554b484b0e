// `docket-runner listen`: heartbeats, the claim long-poll and one supervisor per job; startup
// reconciliation of every job that is not done is reconcile.ts.
import type { ClaimGrant, RunnerConfig } from '../../src/protocol/index.js';
import { ApiError, classify, DocketClient, errorText, retryDelayMs, upgradeHint } from './api.js';
import { Backoff } from './backoff.js';
import { JobSupervisor } from './job.js';
import type { JobHost } from './job-host.js';
import type { JobDb } from './jobs.js';
import { launchers, type LauncherConfig } from './launchers/index.js';
import { type Launcher, LauncherRefused } from './launchers/launcher.js';
import { formatWait, type Output } from './output.js';
import { sleep } from './procs.js';
import { pruneLogs } from './prune-logs.js';
import { reconcileAll } from './reconcile.js';
import { CLI_VERSION } from './version.js';

/** Exit codes of `docket-runner listen` (also in README.md). */
export const EXIT = {
  ok: 0, // stopped by SIGINT/SIGTERM; running sandboxes were left for the next start
  error: 1, // an unexpected error
  usage: 2, // a bad flag or config value
  upgrade: 3, // the server answered 426 listener_upgrade_required
  locked: 4, // another listen uses this data directory
  notRegistered: 5, // no server URL or machine token: run `docket-runner register`
  deregistered: 6, // an admin deregistered this machine: its machine token no longer works
};

/** The longest pause between two checks of whether a heartbeat is due. */
const HEARTBEAT_CHECK_MAX_MS = 5_000;
/** How long a stopping runner tries to end the claim it leaves waiting (cancelWaitingClaim). */
const CLAIM_CANCEL_TIMEOUT_MS = 3_000;
/** How often a pass removes the files of jobs past the log retention (prune-logs.ts). */
const LOG_PRUNE_EVERY_MS = 3_600_000;

export class Runner implements JobHost {
  cfg: Record<string, any>;
  db: JobDb;
  out: Output;
  client: DocketClient;
  launchers: Record<string, Launcher>;
  /** The server's runner configuration, from its last registration or heartbeat answer. */
  serverConfig: Partial<RunnerConfig>;
  stopCtl: AbortController;
  exitCode: number;
  jobs: Map<string, Promise<void>>;
  wake: (() => void) | null;
  lastPruneAtMs: number;
  /** Whether the claim loop is claiming (a claim in flight or the next one due within its gap). */
  claiming = false;
  /** When the server last recorded this machine as seen, as far as this runner can tell (heartbeatDue). */
  serverHeardAtMs = 0;
  constructor({ cfg, db, out, fileConfig = {} }: { cfg: Record<string, any>; db: JobDb; out: Output; fileConfig?: any }) {
    this.cfg = cfg;
    this.db = db;
    this.out = out;
    this.client = new DocketClient({ serverUrl: cfg.server_url, token: cfg.machine_token, timeoutMs: cfg.request_timeout_ms });
    this.launchers = launchers(cfg as LauncherConfig);
    this.serverConfig = { ...(fileConfig.server_config ?? {}) };
    this.stopCtl = new AbortController();
    this.exitCode = EXIT.ok;
    this.jobs = new Map();
    this.wake = null;
    this.lastPruneAtMs = 0;
  }

  get stopping() {
    return this.stopCtl.signal.aborted;
  }
  get stopSignal() {
    return this.stopCtl.signal;
  }
  get protocols() {
    return this.cfg.launchers;
  }

  stop(why: string) {
    if (this.stopping) return;
    this.out.emit('stopping', `stopping: ${why}`, { reason: why });
    this.stopCtl.abort();
    this.wake?.();
  }

  /** The server answered 426: print how to upgrade, stop, leave the sandboxes. */
  upgradeRequired(err: any) {
    if (this.exitCode === EXIT.upgrade) return;
    this.exitCode = EXIT.upgrade;
    const min = err?.body?.min_cli_version;
    const protocols = err?.body?.protocols;
    const why = [
      min ? `the server needs docket-runner ${min} or newer (this is ${CLI_VERSION})` : null,
      Array.isArray(protocols) ? `the server launches ${protocols.join(', ')}; this runner serves ${this.protocols.join(', ')}` : null,
    ].filter(Boolean).join('; ');
    this.out.emit(
      'upgrade_required',
      `the server refused this runner (426 listener_upgrade_required): ${why || err?.message}. ` +
        `To upgrade, ${upgradeHint(err)}; or change --launcher. Then start \`docket-runner listen\` again; running sandboxes are ` +
        'left as they are and the next start reconciles them.',
      { min_cli_version: min ?? null, server_protocols: protocols ?? null, cli_version: CLI_VERSION, protocols: this.protocols, upgrade: upgradeHint(err) },
    );
    this.stop('upgrade required');
  }

  /** The server answered 401 machine_deregistered: the token never works again, so say so and stop. */
  deregistered() {
    if (this.exitCode === EXIT.deregistered) return;
    this.exitCode = EXIT.deregistered;
    this.out.emit(
      'deregistered',
      `this machine (${this.cfg.machine_id ?? 'unknown id'}) was deregistered by an admin of its organization. ` +
        'Ask an admin for a new registration token, run `docket-runner register --server <url> --token <token>`, ' +
        'then start `docket-runner listen` again; running sandboxes are left as they are and the next start reconciles them.',
      { machine_id: this.cfg.machine_id ?? null, reason: 'machine_deregistered' },
    );
    this.stop('machine deregistered');
  }

  /**
   * The server answered a heartbeat or claim 400 invalid_request: what this runner sends comes
   * from its configuration (labels, launchers, the claim wait), so every retry would be refused
   * the same. Say what the server said and stop as a bad configuration (exit code 2).
   */
  refusedAsInvalid(what: string, err: any) {
    if (this.exitCode === EXIT.usage) return;
    this.exitCode = EXIT.usage;
    const field = typeof err.body?.field === 'string' ? err.body.field : null;
    this.out.emit('bad_configuration', `the server refused this runner's ${what} (400 invalid_request): ${err.message}. ` +
      'Fix the configuration (`docket-runner listen --help`) and start `docket-runner listen` again; running sandboxes are ' +
      'left as they are and the next start reconciles them.', { call: what, field, error: err.message });
    this.stop('the server refused the configuration');
  }

  /** A launcher's provider refused its credentials (an E2B API key): every launch would fail the same. */
  launcherRefused(message: string) {
    if (this.exitCode === EXIT.usage) return;
    this.exitCode = EXIT.usage;
    this.out.emit('launcher_refused', `${message}. Fix the launcher's credentials and start \`docket-runner listen\` again; ` +
      'running sandboxes are left as they are and the next start reconciles them.', { error: message });
    this.stop('a launcher refused its credentials');
  }

  /**
   * After reconciliation, each launcher removes what runs for this machine that no job holds: a job
   * resumed, or one parked for a later start (its sandbox is left for that start to reconcile).
   */
  async sweepLaunchers() {
    const held = new Set([...this.jobs.keys(), ...this.db.unfinished().map((row) => `${row.run_id}#${row.attempt}`)]);
    for (const protocol of this.protocols) {
      try {
        await this.launchers[protocol]?.sweep?.(held);
      } catch (e) {
        if (e instanceof LauncherRefused) return this.launcherRefused(e.message);
        this.out.emit('sweep_failed', `the ${protocol} launcher could not look for leftover sandboxes: ${errorText(e)}`, { protocol, error: errorText(e) });
      }
    }
  }

  /** @returns the exit code */
  async run(): Promise<number> {
    this.out.emit('started', `docket-runner ${CLI_VERSION} listening to ${this.cfg.server_url} as ${this.cfg.machine_id ?? 'this machine'} ` +
      `(launchers ${this.protocols.join(', ')}; concurrency ${this.cfg.concurrency}; data ${this.cfg.data_dir})`,
      { cli_version: CLI_VERSION, server_url: this.cfg.server_url, machine_id: this.cfg.machine_id ?? null, protocols: this.protocols, labels: this.cfg.labels,
        concurrency: this.cfg.concurrency, data_dir: this.cfg.data_dir });
    await this.firstHeartbeat();
    if (!this.stopping) await reconcileAll(this);
    if (!this.stopping) await this.sweepLaunchers();
    if (!this.stopping) this.pruneLogs();
    const heartbeats = this.heartbeatLoop();
    await this.claimLoop();
    await Promise.allSettled([...this.jobs.values()]);
    await heartbeats;
    const left = this.db.unfinished().filter((j) => j.state === 'interrupted').length;
    this.out.emit('stopped', `stopped${left ? `; ${left} job(s) left for the next start to reconcile` : ''}`, { left_jobs: left, exit_code: this.exitCode });
    return this.exitCode;
  }

  heartbeatBody() {
    return { cli_version: CLI_VERSION, protocols: this.protocols };
  }

  /**
   * The heartbeat also carries the labels this listener serves when they were configured (flag,
   * environment or config file), so `listen --label gpu` changes what the machine is handed.
   */
  heartbeatWithLabels() {
    const configured = this.cfg.sources?.labels && this.cfg.sources.labels !== 'default';
    return configured ? { ...this.heartbeatBody(), labels: this.cfg.labels } : this.heartbeatBody();
  }

  /** Check the credentials and the version before touching any job; retry transient failures. */
  async firstHeartbeat() {
    const backoff = this.backoff();
    while (!this.stopping) {
      try {
        await this.sendHeartbeat();
        return;
      } catch (e) {
        const delayMs = retryDelayMs(e, backoff.fail());
        if (this.handleLoopError(e, 'heartbeat', backoff.failures, delayMs) === 'stop') return;
        await sleep(delayMs, this.stopSignal);
      }
    }
  }

  get heartbeatIntervalMs() {
    return this.serverConfig.heartbeat_interval_ms ?? 30_000;
  }

  /**
   * A claim is the machine's heartbeat (docs/protocol.md, "Runner protocol"): a separate one is due
   * only while the runner is not claiming (busy at its concurrency, or backing off) and the server
   * has not recorded it for an interval.
   */
  heartbeatDue() {
    return !this.claiming && Date.now() - this.serverHeardAtMs >= this.heartbeatIntervalMs;
  }

  /** A claim starting now is recorded by the server when its record is an interval old (the claim route). */
  claimStarting(nowMs: number) {
    if (nowMs - this.serverHeardAtMs >= this.heartbeatIntervalMs) this.serverHeardAtMs = nowMs;
  }

  async heartbeatLoop() {
    const backoff = this.backoff();
    while (!this.stopping) {
      // Checked several times an interval, so a runner that turns busy heartbeats soon after it is due.
      await sleep(Math.min(this.heartbeatIntervalMs, HEARTBEAT_CHECK_MAX_MS), this.stopSignal);
      if (this.stopping) return;
      if (Date.now() - this.lastPruneAtMs >= LOG_PRUNE_EVERY_MS) this.pruneLogs();
      if (!this.heartbeatDue()) continue;
      try {
        await this.sendHeartbeat();
        backoff.succeed();
      } catch (e) {
        backoff.fail();
        // Still due, it is sent again at the next check; a Retry-After longer than that is waited out on top.
        const checkMs = Math.min(this.heartbeatIntervalMs, HEARTBEAT_CHECK_MAX_MS);
        const extraMs = retryDelayMs(e, 0) - checkMs;
        this.handleLoopError(e, 'heartbeat', backoff.failures, checkMs + Math.max(0, extraMs));
        if (extraMs > 0) await sleep(extraMs, this.stopSignal);
      }
    }
  }

  /** One heartbeat: the server heard this machine as of its sending, and its configuration is taken. */
  async sendHeartbeat() {
    const sentAtMs = Date.now();
    const res = await this.client.heartbeat(this.heartbeatWithLabels(), { signal: this.stopSignal });
    this.serverHeardAtMs = sentAtMs;
    this.takeServerConfig(res.body.config);
  }

  takeServerConfig(config: RunnerConfig) {
    Object.assign(this.serverConfig, config);
  }

  /**
   * Log a failed heartbeat or claim (its `failures` in a row) and when it is tried again. Returns
   * 'stop' when the runner must stop.
   */
  handleLoopError(e: unknown, what: string, failures: number, retryInMs: number) {
    if (this.stopping) return 'stop';
    const kind = classify(e);
    if (kind === 'upgrade') {
      this.upgradeRequired(e);
      return 'stop';
    }
    const err = e as any;
    if (err?.status === 401 && err?.body?.reason === 'machine_deregistered') {
      this.deregistered();
      return 'stop';
    }
    if (err?.status === 400 && err?.code === 'invalid_request') {
      this.refusedAsInvalid(what, err);
      return 'stop';
    }
    const hint = err?.status === 401 ? ' (the machine token was refused; if this lasts, run `docket-runner register` again)'
      : err?.retryAfterMs ? ` (the server asked for ${err.retryAfterMs} ms)` : '';
    this.out.emit(`${what}_failed`, `${what} failed: ${errorText(e)}${hint}; trying again in ${formatWait(retryInMs)}`, {
      status: err?.status ?? 0, code: err?.code ?? 'error', failures, retry_after_ms: err?.retryAfterMs ?? null, retry_in_ms: retryInMs,
    });
    return 'retry';
  }

  async claimLoop() {
    const backoff = this.backoff();
    let lastClaimAtMs = -Infinity;
    while (!this.stopping) {
      if (this.jobs.size >= this.cfg.concurrency) {
        this.claiming = false;
        await new Promise((resolve) => (this.wake = () => resolve(undefined)));
        this.wake = null;
        continue;
      }
      // A 204 or a refusal that comes back at once must not turn into a tight loop of claims.
      const gapMs = lastClaimAtMs + (this.cfg.claim_min_gap_ms ?? 1_000) - Date.now();
      if (gapMs > 0) {
        await sleep(gapMs, this.stopSignal);
        continue;
      }
      lastClaimAtMs = Date.now();
      const waitMs = this.cfg.claim_wait_ms ?? this.serverConfig.claim_wait_ms ?? 55_000;
      let res;
      this.claiming = true;
      this.claimStarting(lastClaimAtMs);
      try {
        res = await this.client.claim({ ...this.heartbeatBody(), wait_ms: waitMs }, { signal: this.stopSignal });
      } catch (e) {
        // Cut short by the stop, not answered: the claim still waits at the server.
        if (e instanceof ApiError && e.code === 'aborted') return this.cancelWaitingClaim();
        const delayMs = retryDelayMs(e, backoff.fail());
        if (this.handleLoopError(e, 'claim', backoff.failures, delayMs) === 'stop') return;
        this.claiming = false; // backing off: heartbeats keep the machine seen
        await sleep(delayMs, this.stopSignal);
        continue;
      }
      backoff.succeed();
      if (res.status === 204 || !res.body) continue;
      this.startClaimed(res.body);
    }
  }

  /**
   * The claim this runner stopped waiting for still waits at the server, where a run dispatched
   * now would be handed to it and sit claimed until its lease lapsed: end it (bounded by
   * CLAIM_CANCEL_TIMEOUT_MS; a failure is said, and the lease lapse stays the backstop).
   */
  async cancelWaitingClaim() {
    try {
      await this.client.cancelClaim({ timeoutMs: CLAIM_CANCEL_TIMEOUT_MS });
    } catch (e) {
      this.out.emit('claim_cancel_failed', `could not end the waiting claim (${errorText(e)}); a run handed to it is queued again when its lease lapses`,
        { error: errorText(e) });
    }
  }

  startClaimed(claim: ClaimGrant) {
    const admitted = this.db.admitClaim(claim);
    if (!admitted.admitted) {
      // Never run the same attempt twice, nor two attempts of one run at once: let this claim lapse.
      this.out.emit('claim_skipped', `${claim.run_id}#${claim.attempt} skipped: ${admitted.why === 'duplicate'
        ? 'this attempt was already scheduled here' : `attempt ${admitted.job.attempt} of this run is still active here`}`,
      { run_id: claim.run_id, attempt: claim.attempt, why: admitted.why });
      return;
    }
    const sup = new JobSupervisor(this, admitted.job, claim);
    this.track(sup, sup.runClaimed());
  }

  track(sup: JobSupervisor, work: Promise<void>) {
    const key = `${sup.runId}#${sup.attempt}`;
    const p = work
      .catch((e) => {
        this.out.run('job_error', sup.view, `error: ${errorText(e)}`, { error: errorText(e) });
        try {
          sup.park('reconcile', `the runner hit an error: ${errorText(e)}`);
        } catch {
          // the row may already be final
        }
      })
      .finally(() => {
        this.jobs.delete(key);
        this.wake?.();
      });
    this.jobs.set(key, p);
  }

  pruneLogs() {
    pruneLogs(this.db, this.out, this.cfg.log_retention_ms);
    this.lastPruneAtMs = Date.now();
  }

  backoff() {
    return new Backoff({ baseMs: this.cfg.backoff_base_ms, maxMs: this.cfg.backoff_max_ms });
  }
}
