// The runner's side of docs/protocol.md: one function per call, and one place that decides what
// an answer means for the runner (classify). No retries here; the callers own their loops.
import { CLI_VERSION } from './version.mjs';

/** Codes after which a runner destroys the workload (docs/protocol.md, "Errors"). */
export const DEFINITIVE_CODES = new Set(['task_gone', 'other_organization', 'other_machine']);
/** Codes that end this attempt's work without destroying the sandbox's files. */
export const ATTEMPT_OVER_CODES = new Set(['stale_attempt', 'lease_expired']);

/** The longest Retry-After the runner honours, so that no answer can park it for long. */
export const RETRY_AFTER_MAX_MS = 300_000;

export class ApiError extends Error {
  /**
   * @param {number} status HTTP status, 0 for a network error or timeout
   * @param {string} code the stable error code, or `network` / `timeout` / `bad_answer`
   * @param {string} message
   * @param {any} [body]
   * @param {number | null} [retryAfterMs] what the answer's Retry-After asked for
   */
  constructor(status, code, message, body, retryAfterMs = null) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.body = body;
    this.retryAfterMs = retryAfterMs;
  }
}

/**
 * A Retry-After header in milliseconds (delta seconds or an HTTP date), capped at
 * RETRY_AFTER_MAX_MS; null when absent or unreadable.
 * @param {string | null} header @param {number} [nowMs]
 * @returns {number | null}
 */
export function parseRetryAfter(header, nowMs = Date.now()) {
  if (!header) return null;
  const text = header.trim();
  const ms = /^\d+$/.test(text) ? Number(text) * 1_000 : Date.parse(text) - nowMs;
  if (!Number.isFinite(ms)) return null;
  return Math.min(Math.max(ms, 0), RETRY_AFTER_MAX_MS);
}

/**
 * The wait before retrying after `err`: the backoff's delay, or longer when the server asked for
 * more with Retry-After (429 too_many_waiters, 429 rate_limited).
 * @param {unknown} err @param {number} backoffMs
 */
export function retryDelayMs(err, backoffMs) {
  const asked = err instanceof ApiError ? err.retryAfterMs ?? 0 : 0;
  return Math.max(backoffMs, asked);
}

/**
 * What an error means for the runner.
 * - `definitive`: destroy the workload (task_gone, other_organization, other_machine)
 * - `attempt_over`: this attempt is no longer ours to run (stale_attempt, lease_expired)
 * - `upgrade`: 426 listener_upgrade_required; stop cleanly, leave sandboxes
 * - `transient`: back off with jitter and try again (5xx, timeouts, network, 401, anything unknown)
 * @param {unknown} err
 * @returns {'definitive' | 'attempt_over' | 'upgrade' | 'transient'}
 */
export function classify(err) {
  if (!(err instanceof ApiError)) return 'transient';
  if (err.status === 426 || err.code === 'listener_upgrade_required') return 'upgrade';
  if (DEFINITIVE_CODES.has(err.code)) return 'definitive';
  if (ATTEMPT_OVER_CODES.has(err.code)) return 'attempt_over';
  return 'transient';
}

/**
 * A small JSON client for one Docket deployment.
 */
export class DocketClient {
  /**
   * @param {{ serverUrl: string, token?: string, timeoutMs?: number, fetchImpl?: typeof fetch }} opts
   */
  constructor({ serverUrl, token, timeoutMs = 30_000, fetchImpl = fetch }) {
    this.serverUrl = serverUrl.replace(/\/+$/, '');
    this.token = token;
    this.timeoutMs = timeoutMs;
    this.fetchImpl = fetchImpl;
  }

  /**
   * @param {string} method
   * @param {string} path under the server URL, starting with /v1
   * @param {{ body?: any, token?: string, timeoutMs?: number, signal?: AbortSignal }} [opts]
   * @returns {Promise<{ status: number, body: any }>} 2xx answers only; anything else throws ApiError
   */
  async request(method, path, { body, token = this.token, timeoutMs = this.timeoutMs, signal } = {}) {
    const timeout = AbortSignal.timeout(timeoutMs);
    const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
    /** @type {Response} */
    let res;
    try {
      res = await this.fetchImpl(this.serverUrl + path, {
        method,
        headers: {
          'content-type': 'application/json',
          'user-agent': `docket-runner/${CLI_VERSION}`,
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: combined,
      });
    } catch (e) {
      if (signal?.aborted) throw new ApiError(0, 'aborted', 'the request was cancelled');
      if (timeout.aborted) throw new ApiError(0, 'timeout', `${method} ${path} timed out after ${timeoutMs} ms`);
      throw new ApiError(0, 'network', `${method} ${path} failed: ${errorText(e)}`);
    }
    let text = '';
    try {
      text = await res.text();
    } catch (e) {
      throw new ApiError(0, 'network', `${method} ${path}: reading the answer failed: ${errorText(e)}`);
    }
    let parsed = null;
    if (text) {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = null;
      }
    }
    if (res.status >= 200 && res.status < 300) {
      if (text && parsed === null) {
        throw new ApiError(res.status, 'bad_answer', `${method} ${path} answered ${res.status} with non-JSON`);
      }
      return { status: res.status, body: parsed };
    }
    const err = parsed && typeof parsed === 'object' ? parsed.error : null;
    const code = err && typeof err.code === 'string' ? err.code : `http_${res.status}`;
    const message = err && typeof err.message === 'string' ? err.message : `${method} ${path} answered ${res.status}`;
    throw new ApiError(res.status, code, message, err ?? text.slice(0, 500), parseRetryAfter(res.headers.get('retry-after')));
  }

  /** @param {string} registrationToken @param {object} body */
  register(registrationToken, body) {
    return this.request('POST', '/v1/runners/register', { body, token: registrationToken });
  }
  /** @param {{ cli_version: string, protocols: string[] }} body */
  heartbeat(body, opts = {}) {
    return this.request('POST', '/v1/runners/heartbeat', { body, ...opts });
  }
  /**
   * Long-poll. The HTTP timeout is the wait plus a margin, so a slow answer is not cut short.
   * @param {{ cli_version: string, protocols: string[], wait_ms?: number }} body
   * @param {{ signal?: AbortSignal }} [opts]
   */
  claim(body, { signal } = {}) {
    const timeoutMs = (body.wait_ms ?? 30_000) + this.timeoutMs;
    return this.request('POST', '/v1/runners/claim', { body, signal, timeoutMs });
  }
  /**
   * One of launched | lease | launch-failed | stopped.
   * @param {string} runId @param {number} attempt @param {string} call @param {object} [body]
   */
  attemptCall(runId, attempt, call, body = {}, opts = {}) {
    return this.request('POST', `/v1/runs/${encodeURIComponent(runId)}/attempts/${attempt}/${call}`, { body, ...opts });
  }
  /** The daemon's call, with the run-attempt token. @param {string} runId @param {object} body */
  report(runId, body, opts = {}) {
    return this.request('POST', `/v1/runs/${encodeURIComponent(runId)}/reports`, { body, ...opts });
  }
}

/** What a runner says when the server's 426 carries no `upgrade` hint of its own. */
export const DEFAULT_UPGRADE_HINT = 'install a current runner the way this deployment distributes it (runner-cli/README.md, "Install")';

/**
 * How to upgrade, as the server that refused this runner says (its 426 `upgrade` field).
 * @param {unknown} err
 */
export function upgradeHint(err) {
  const hint = err instanceof ApiError ? err.body?.upgrade : undefined;
  return typeof hint === 'string' && hint.trim() ? hint.trim().slice(0, 1_000) : DEFAULT_UPGRADE_HINT;
}

/** @param {unknown} e */
export function errorText(e) {
  if (e instanceof Error) {
    const cause = /** @type {any} */ (e).cause;
    return cause instanceof Error && cause.message ? `${e.message} (${cause.message})` : e.message;
  }
  return String(e);
}
