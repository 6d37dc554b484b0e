// The runner's side of docs/protocol.md: one function per call, and one place that decides what
// an answer means for the runner (classify). No retries here; the callers own their loops.
// Bodies are typed from the contract's request schemas and every answer is decoded with its answer
// schema (src/protocol/runners.ts), so a server that renamed a field is a clear error at the call.
import type { z } from 'zod';
import type {
  AttemptAnswer,
  ClaimGrant,
  HeartbeatAnswer,
  CheckpointBody,
  CheckpointUnusableBody,
  LaunchedBody,
  LaunchFailedBody,
  LeaseBody,
  PushedBody,
  RegisterBody,
  ReportBody,
  StoppedBody,
  ClaimBody,
  HeartbeatBody,
} from '../../src/protocol/runners.js';
import { type FetchAnswer, type FetchLike, httpFetch } from './http-fetch.js';
import { CLI_VERSION } from './version.js';

/** Codes after which a runner destroys the workload (docs/protocol.md, "Errors"). */
export const DEFINITIVE_CODES = new Set(['task_gone', 'other_organization', 'other_machine']);
/** Codes that end this attempt's work without destroying the sandbox's files. */
export const ATTEMPT_OVER_CODES = new Set(['stale_attempt', 'lease_expired']);

/** The longest Retry-After the runner honours, so that no answer can park it for long. */
export const RETRY_AFTER_MAX_MS = 300_000;

export class ApiError extends Error {
  retryAfterMs: number | null;
  body: any;
  code: string;
  status: number;
  /**
   * @param status HTTP status, 0 for a network error or timeout
   * @param code the stable error code, or `network` / `timeout` / `bad_answer` (an answer the contract does not describe)
   * @param retryAfterMs what the answer's Retry-After asked for
   */
  constructor(status: number, code: string, message: string, body?: any, retryAfterMs: number | null = null) {
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
 */
export function parseRetryAfter(header: string | null, nowMs: number = Date.now()): number | null {
  if (!header) return null;
  const text = header.trim();
  const ms = /^\d+$/.test(text) ? Number(text) * 1_000 : Date.parse(text) - nowMs;
  if (!Number.isFinite(ms)) return null;
  return Math.min(Math.max(ms, 0), RETRY_AFTER_MAX_MS);
}

/**
 * The wait before retrying after `err`: the backoff's delay, or longer when the server asked for
 * more with Retry-After (429 too_many_waiters, 429 rate_limited).
 */
export function retryDelayMs(err: unknown, backoffMs: number) {
  const asked = err instanceof ApiError ? err.retryAfterMs ?? 0 : 0;
  return Math.max(backoffMs, asked);
}

/**
 * What an error means for the runner.
 * - `definitive`: destroy the workload (task_gone, other_organization, other_machine)
 * - `attempt_over`: this attempt is no longer ours to run (stale_attempt, lease_expired)
 * - `upgrade`: 426 listener_upgrade_required; stop cleanly, leave sandboxes
 * - `transient`: back off with jitter and try again (5xx, timeouts, network, 401, anything unknown)
 */
export function classify(err: unknown): 'definitive' | 'attempt_over' | 'upgrade' | 'transient' {
  if (!(err instanceof ApiError)) return 'transient';
  if (err.status === 426 || err.code === 'listener_upgrade_required') return 'upgrade';
  if (DEFINITIVE_CODES.has(err.code)) return 'definitive';
  if (ATTEMPT_OVER_CODES.has(err.code)) return 'attempt_over';
  return 'transient';
}

/** The body each attempt call sends (POST /v1/runs/:id/attempts/:n/<call>). */
export type AttemptCallBodies = {
  launched: LaunchedBody;
  lease: LeaseBody;
  'launch-failed': LaunchFailedBody;
  stopped: StoppedBody;
  'checkpoint-unusable': CheckpointUnusableBody;
};
export type AttemptCall = keyof AttemptCallBodies;

/** A decoded answer: its status and its body, as the contract describes it. */
export type Answer<T> = { status: number; body: T };

/**
 * The answer body decoded with its contract schema; one that does not parse is a `bad_answer`
 * naming the call and the first field that differs, not a crash somewhere later.
 */
export function decodeAnswer<S extends z.ZodType>(schema: S, what: string, answer: { status: number; body: unknown }): Answer<z.infer<S>> {
  const parsed = schema.safeParse(answer.body);
  if (parsed.success) return { status: answer.status, body: parsed.data };
  const issue = parsed.error.issues[0];
  const field = issue?.path.length ? issue.path.map(String).join('.') : '(the body)';
  throw new ApiError(answer.status, 'bad_answer', `${what} answered ${answer.status} with a body the protocol does not describe: ${field}: ${issue?.message ?? 'invalid'}`,
    JSON.stringify(answer.body ?? null).slice(0, 500));
}

type Contract = typeof import('../../src/protocol/runners.js');
let contractModule: Promise<Contract> | null = null;

/**
 * The contract's answer schemas, loaded on first use: zod is most of an idle `listen` process's
 * memory, and an idle runner decodes no answer but its heartbeat's (heartbeatFits).
 */
export function contract(): Promise<Contract> {
  contractModule ??= import('../../src/protocol/runners.js');
  return contractModule;
}

const MACHINE_ID = /^mch_[0-9a-f]{24}$/;
const CONFIG_INTS = ['lease_ttl_ms', 'lease_refresh_ms', 'heartbeat_interval_ms', 'claim_wait_ms', 'sandbox_lifetime_ms'];

/**
 * Whether a heartbeat answer has the shape HeartbeatAnswer describes, checked without zod. It never
 * accepts what the schema refuses (runner-cli/test/lazy-contract.test.mjs); anything it does not
 * accept is decoded by the schema, for the precise error.
 */
export function heartbeatFits(body: any): body is HeartbeatAnswer {
  const config = body?.config;
  return typeof body?.machine_id === 'string' && MACHINE_ID.test(body.machine_id) && Number.isSafeInteger(body.server_time_ms)
    && typeof config === 'object' && config !== null && CONFIG_INTS.every((k) => Number.isSafeInteger(config[k]))
    && typeof config.min_cli_version === 'string' && Array.isArray(config.protocols) && config.protocols.every((p: unknown) => typeof p === 'string');
}

/** Per-call options of DocketClient.request. */
export type RequestOptions = { body?: any; token?: string; timeoutMs?: number; signal?: AbortSignal };

/**
 * A small JSON client for one Docket deployment.
 */
export class DocketClient {
  fetchImpl: FetchLike;
  timeoutMs: number;
  token: string | undefined;
  serverUrl: string;
  constructor({ serverUrl, token, timeoutMs = 30_000, fetchImpl = httpFetch }: { serverUrl: string; token?: string; timeoutMs?: number; fetchImpl?: FetchLike }) {
    this.serverUrl = serverUrl.replace(/\/+$/, '');
    this.token = token;
    this.timeoutMs = timeoutMs;
    this.fetchImpl = fetchImpl;
  }

  /**
   * @param path under the server URL, starting with /v1
   * @returns 2xx answers only; anything else throws ApiError
   */
  async request(method: string, path: string, { body, token = this.token, timeoutMs = this.timeoutMs, signal }: RequestOptions = {}): Promise<{ status: number; body: any }> {
    const timeout = AbortSignal.timeout(timeoutMs);
    const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
    let res: FetchAnswer;
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

  /** `request`, with the answer decoded by the contract schema `schema` names. */
  async call<K extends 'Registered' | 'AttemptAnswer' | 'PushCredential' | 'ClaimCancelled'>(schema: K, method: string, path: string, options: RequestOptions = {}): Promise<Answer<z.infer<Contract[K]>>> {
    const answer = await this.request(method, path, options);
    const decoder = (await contract())[schema] as Contract[K];
    return decodeAnswer(decoder, `${method} ${path}`, answer) as Answer<z.infer<Contract[K]>>;
  }

  register(registrationToken: string, body: RegisterBody) {
    return this.call('Registered', 'POST', '/v1/runners/register', { body, token: registrationToken });
  }
  async heartbeat(body: HeartbeatBody, opts: RequestOptions = {}): Promise<Answer<HeartbeatAnswer>> {
    const path = '/v1/runners/heartbeat';
    const answer = await this.request('POST', path, { body, ...opts });
    if (heartbeatFits(answer.body)) return { status: answer.status, body: answer.body };
    return decodeAnswer((await contract()).HeartbeatAnswer, `POST ${path}`, answer);
  }
  /**
   * Long-poll. The HTTP timeout is the wait plus a margin, so a slow answer is not cut short.
   * @returns a grant (200), or no body (204: nothing matched within the wait)
   */
  async claim(body: ClaimBody, { signal }: { signal?: AbortSignal } = {}): Promise<Answer<ClaimGrant> | { status: 204; body: null }> {
    const timeoutMs = (body.wait_ms ?? 30_000) + this.timeoutMs;
    const path = '/v1/runners/claim';
    const answer = await this.request('POST', path, { body, signal, timeoutMs });
    if (answer.status === 204) return { status: 204, body: null };
    return decodeAnswer((await contract()).ClaimGrant, `POST ${path}`, answer);
  }
  /** A stopping runner ends the claim it leaves waiting at the server (docs/protocol.md, "Runner protocol"). */
  cancelClaim(opts: RequestOptions = {}) {
    return this.call('ClaimCancelled', 'POST', '/v1/runners/claim/cancel', { body: {}, ...opts });
  }
  /**
   * One of launched | lease | launch-failed | stopped | checkpoint-unusable.
   */
  attemptCall<C extends AttemptCall>(runId: string, attempt: number, call: C, body?: AttemptCallBodies[C], opts: RequestOptions = {}): Promise<Answer<AttemptAnswer>> {
    return this.call('AttemptAnswer', 'POST', `/v1/runs/${encodeURIComponent(runId)}/attempts/${attempt}/${call}`, { body: body ?? {}, ...opts });
  }
  /** The publication branch's push credential (docs/protocol.md, "Publication"); never written anywhere. */
  pushCredential(runId: string, attempt: number, opts: RequestOptions = {}) {
    return this.call('PushCredential', 'POST', `/v1/runs/${encodeURIComponent(runId)}/attempts/${attempt}/push-credential`, { body: {}, ...opts });
  }
  /** The push is done: Docket takes the pull request step from here. */
  pushed(runId: string, attempt: number, body: PushedBody, opts: RequestOptions = {}) {
    return this.call('AttemptAnswer', 'POST', `/v1/runs/${encodeURIComponent(runId)}/attempts/${attempt}/pushed`, { body, ...opts });
  }
  /** The daemon's checkpoint of a pausing attempt, with the run-attempt token. */
  checkpoint(runId: string, attempt: number, body: CheckpointBody, opts: RequestOptions = {}) {
    return this.call('AttemptAnswer', 'POST', `/v1/runs/${encodeURIComponent(runId)}/attempts/${attempt}/checkpoint`, { body, ...opts });
  }
  /** The daemon's call, with the run-attempt token. */
  report(runId: string, body: ReportBody, opts: RequestOptions = {}): Promise<Answer<AttemptAnswer>> {
    return this.call('AttemptAnswer', 'POST', `/v1/runs/${encodeURIComponent(runId)}/reports`, { body, ...opts });
  }
}

/** What a runner says when the server's 426 carries no `upgrade` hint of its own. */
export const DEFAULT_UPGRADE_HINT = 'install a current runner the way this deployment distributes it (runner-cli/README.md, "Install")';

/**
 * How to upgrade, as the server that refused this runner says (its 426 `upgrade` field).
 */
export function upgradeHint(err: unknown) {
  const hint = err instanceof ApiError ? err.body?.upgrade : undefined;
  return typeof hint === 'string' && hint.trim() ? hint.trim().slice(0, 1_000) : DEFAULT_UPGRADE_HINT;
}

export function errorText(e: unknown) {
  if (e instanceof Error) {
    const cause = (e as any).cause;
    return cause instanceof Error && cause.message ? `${e.message} (${cause.message})` : e.message;
  }
  return String(e);
}
