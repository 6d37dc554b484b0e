// The attempt the daemon speaks for: its run-attempt token's client, its limits, its reports, and
// what has happened so far; and which server answers end the attempt for good.
import { ApiError, classify, DocketClient } from '../api.js';
import { Backoff } from '../backoff.js';
import { headRevision } from '../patch.js';
import { DAEMON_EXIT, daemonLimits, type DaemonLimits } from './limits.js';
import { ReportBuffer, ReportSequence } from './report-batches.js';

/**
 * What the daemon's phases share: the attempt it speaks for, its reports, and what has happened
 * so far. The report loop, the attempt watch and the signal handler run side by side and tell
 * each other through it (attemptOver, stopping).
 */
export type Daemon = {
  runId: string;
  attempt: number;
  client: DocketClient;
  limits: DaemonLimits;
  stateDir: string | undefined;
  log: (s: string) => void;
  sourceRevision: string | null;
  buffer: ReportBuffer;
  reports: ReportSequence;
  /** The last failed report's error, so the retry waits at least its Retry-After. */
  lastFailure: unknown;
  linesSent: number;
  /** The code of the answer that ended this attempt; once set, nothing more is sent. */
  attemptOver: string | null;
  /** A stop signal came from outside (the runner's stop request or lifetime). */
  stopping: boolean;
  /** The runner asked for a checkpoint (SIGUSR1): the run is pausing. */
  pausing: boolean;
  /** Why the checkpoint is partial (the agent ignored the request), or null. */
  checkpointNote: string | null;
};

/** The attempt's client, limits and source revision, with nothing reported yet. */
export async function startDaemon(env: Record<string, string | undefined>, cwd: string, log: (s: string) => void): Promise<Daemon> {
  const limits = daemonLimits(env);
  return {
    runId: env.DOCKET_RUN_ID as string,
    attempt: Number(env.DOCKET_ATTEMPT),
    client: new DocketClient({ serverUrl: env.DOCKET_URL as string, token: env.DOCKET_ATTEMPT_TOKEN, timeoutMs: 30_000 }),
    limits,
    stateDir: env.DOCKET_STATE_DIR,
    log,
    sourceRevision: env.DOCKET_SOURCE_REVISION || (await headRevision(cwd)),
    buffer: new ReportBuffer(limits),
    reports: new ReportSequence(),
    lastFailure: null,
    linesSent: 0,
    attemptOver: null,
    stopping: false,
    pausing: false,
    checkpointNote: null,
  };
}

/** How the last call of an end went, for final.json: the answer that ended the attempt, and why the call was not delivered. */
export function deliveryRecord(d: Daemon, sent: { delivered: boolean; lastError: string }) {
  return { attempt_over: d.attemptOver, error: sent.delivered ? null : sent.lastError || d.attemptOver };
}

/** The daemon's exit code after the last call of an end: `deliveredCode`, or why it was not delivered. */
export function exitCodeAfter(d: Daemon, delivered: boolean, deliveredCode: number) {
  if (delivered) return deliveredCode;
  return d.attemptOver ? DAEMON_EXIT.attemptOver : DAEMON_EXIT.undelivered;
}

/** The backoff of the report and checkpoint retries. */
export function reportBackoff(d: Daemon) {
  return new Backoff({ baseMs: d.limits.backoffBaseMs, maxMs: d.limits.backoffMaxMs });
}

/**
 * Whether an error answer means this attempt can never report again. A 401 is one for the daemon:
 * its attempt token is fixed for the attempt, so a token refused now is refused on every retry.
 */
export function endsAttempt(e: unknown) {
  const kind = classify(e);
  return kind === 'definitive' || kind === 'attempt_over' || (e instanceof ApiError && e.status === 401);
}

/** Nothing more is sent for this attempt: say why, once (the first answer that ended it). */
export function attemptEnded(d: Daemon, e: unknown) {
  if (d.attemptOver) return;
  const err = e as ApiError;
  d.attemptOver = err.code;
  const why = err.status === 401 ? 'the attempt token was refused' : 'this attempt is over';
  d.log(`docket-runner daemon: the server answered ${err.status} ${err.code} (${err.message}): ${why}; nothing more is sent`);
}
