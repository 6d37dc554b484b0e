// The one waiting lease call of a running job, and the lease refusals that are the daemon's own doing.
import type { CallResult, JobAttempt } from './job-attempt.js';

/**
 * Run states in which the server refuses the lease (409 invalid_transition) because the daemon's
 * own call ended the attempt's work: a stored checkpoint (paused), a final report with a blocker (blocked).
 */
const MOVED_ON_STATES = new Set(['paused', 'blocked']);

/** The state a lease refusal names when the daemon's own call moved the run on (MOVED_ON_STATES), or null. */
export function movedOnState(r: CallResult): string | null {
  if (r.kind !== 'transient') return null;
  const state = r.error?.code === 'invalid_transition' ? r.error.body?.state : null;
  return MOVED_ON_STATES.has(state) ? state : null;
}

/**
 * The one waiting `launched`/`lease` call of a running job (docs/protocol.md, "Lease waits"). Its
 * HTTP timeout is the wait plus the usual request timeout, as a claim's is; abandoning it (the
 * sandbox ended, the listener stops) aborts the request.
 */
export class LeaseWaits {
  job: JobAttempt;
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
  constructor(job: JobAttempt, informed: boolean) {
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
