// The Octokit client a project's provider calls GitHub through (issue 10, "A GitHub client"):
// authenticated as the project's GitHub App installation, every request bounded in time
// (GITHUB_REQUEST_TIMEOUT_MS), failures retried with backoff a bounded number of times
// (GITHUB_RETRIES, the nth retry after n² × GITHUB_RETRY_BASE_MS), and GitHub's rate-limit
// headers honoured: a short wait is waited out, a long one fails at once with rate_limited.

import { createAppAuth } from "@octokit/auth-app";
import { Octokit } from "@octokit/core";
import { retry } from "@octokit/plugin-retry";
import { throttling } from "@octokit/plugin-throttling";
import Bottleneck from "bottleneck/light.js";
import type { Config } from "../../config";
import { log } from "../../lib/log";
import { fetchOutbound, OutboundRefused, outboundPolicy, outboundRefusal } from "../../lib/outbound-address";
import { GitHubError, GitHubTimeout } from "./errors";
import type { Headroom } from "../provider";
import type { GitHubLedger } from "./ledger";
import { toPkcs8Pem } from "./private-key";

const GitHubOctokit = Octokit.plugin(retry, throttling);
export type GitHubClient = InstanceType<typeof GitHubOctokit>;

/** The REST API version the provider's field names come from. */
export const GITHUB_API_VERSION = "2022-11-28";

export interface GitHubClientOptions {
  baseUrl: string;
  appId: string;
  installationId: string;
  privateKey: string;
  /** Names the client's throttling queue, so one project's backlog does not delay another's. */
  queueId: string;
  /** Where the installation's rate limit and counted requests are recorded; null records nothing. */
  ledger?: GitHubLedger | null;
}

// The global fetch is called through a closure: workerd refuses it called with another `this`.
const globalFetch: typeof fetch = (input, init) => fetch(input, init);

export function githubClient(options: GitHubClientOptions, config: Config, fetchImpl: typeof fetch = globalFetch): GitHubClient {
  let privateKey: string;
  try {
    privateKey = toPkcs8Pem(options.privateKey);
  } catch (err) {
    throw new GitHubError("unauthorized", `GitHub App ${options.appId}: ${(err as Error).message}`);
  }
  // A project's API root was checked when it was set; a stored one is checked again under today's policy.
  const refused = outboundRefusal(new URL(options.baseUrl), outboundPolicy(config));
  if (refused !== null) throw new GitHubError("forbidden", `GitHub API ${options.baseUrl}: not sent, ${refused} (this deployment sends no requests there)`);
  // Rate limits are the throttling plugin's to wait out; the retry plugin leaves 429 alone.
  const rateLimitRetry = (retryAfterS: number, _options: unknown, _octokit: unknown, retryCount: number) =>
    retryCount < config.githubRetries && retryAfterS * 1_000 <= config.githubRateLimitWaitMaxMs;
  return new GitHubOctokit({
    baseUrl: options.baseUrl.replace(/\/+$/, ""),
    authStrategy: createAppAuth,
    auth: {
      appId: options.appId,
      privateKey,
      installationId: options.installationId,
      // With GITHUB_TOKEN_CACHE_MAX 0 each client keeps its own token (auth-app's own cache).
      ...(config.githubTokenCacheMax > 0 ? { cache: sharedTokenCache(options.baseUrl, options.appId, privateKey, config.githubTokenCacheMax) } : {}),
    },
    headers: { "x-github-api-version": GITHUB_API_VERSION },
    request: { fetch: observedFetch(boundedFetch(policedFetch(fetchImpl, config), config.githubRequestTimeoutMs), options.ledger ?? null) },
    retry: {
      retries: config.githubRetries,
      retryAfterBaseValue: config.githubRetryBaseMs,
      doNotRetry: [400, 401, 403, 404, 410, 422, 429, 451],
    },
    throttle: { id: options.queueId, onRateLimit: rateLimitRetry, onSecondaryRateLimit: rateLimitRetry, ...clientLimiters() },
    log: { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} },
  });
}

/**
 * The throttling plugin's limiters, one set per client. The plugin's default groups live per
 * isolate, and workerd lets no request wait on another request's timers and promises: two
 * requests of one isolate queued behind the same limiter (two reconciliations at once) hung until
 * the runtime cancelled them. A client serves one admission or reconciliation, so its own limiters
 * keep GitHub's pacing for what it sends (one write at a time, a second apart; one token request).
 */
function clientLimiters() {
  const group = (options: Bottleneck.ConstructorOptions) => new Bottleneck.Group(options);
  return {
    global: group({ maxConcurrent: 10 }),
    auth: group({ maxConcurrent: 1 }),
    search: group({ maxConcurrent: 1, minTime: 2_000 }),
    write: group({ maxConcurrent: 1, minTime: 1_000 }),
    notifications: group({ maxConcurrent: 1, minTime: 3_000 }),
  };
}

/**
 * Installation tokens live an hour; providers are made per admission, so tokens are kept per
 * isolate (at most GITHUB_TOKEN_CACHE_MAX) and reused until five minutes before they expire. A
 * token is shared only by clients holding the same private key: naming another tenant's App and
 * installation without its key must not borrow that installation's token.
 */
const TOKEN_EXPIRY_MARGIN_MS = 300_000;
const tokenCache = new Map<string, { value: string; reuseUntilMs: number }>();

function sharedTokenCache(baseUrl: string, appId: string, privateKey: string, max: number) {
  let scope: Promise<string> | null = null;
  const scoped = async (key: string) => {
    scope ??= crypto.subtle.digest("SHA-256", new TextEncoder().encode(privateKey)).then((digest) => {
      const hex = [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
      return `${baseUrl}|${appId}|${hex}`;
    });
    return `${await scope}|${key}`;
  };
  return {
    async get(key: string): Promise<string | undefined> {
      const name = await scoped(key);
      const entry = tokenCache.get(name);
      if (!entry) return undefined;
      if (entry.reuseUntilMs > Date.now()) return entry.value;
      tokenCache.delete(name);
      return undefined;
    },
    async set(key: string, value: string): Promise<void> {
      // auth-app's cached value is "token|createdAt|expiresAt|…".
      const expiresAtMs = Date.parse(value.split("|")[2] ?? "");
      if (!Number.isFinite(expiresAtMs)) return;
      const name = await scoped(key);
      tokenCache.delete(name);
      for (const oldest of tokenCache.keys()) {
        if (tokenCache.size < max) break;
        tokenCache.delete(oldest);
      }
      tokenCache.set(name, { value, reuseUntilMs: expiresAtMs - TOKEN_EXPIRY_MARGIN_MS });
    },
  };
}

/**
 * fetch whose every answer, retries included, is told to the ledger: the rate limit it states and
 * whether GitHub counted it (all but a 304). An installation token request is the App's, not the
 * installation's, and is left out. A ledger that cannot record does not fail the read.
 */
function observedFetch(fetchImpl: typeof fetch, ledger: GitHubLedger | null): typeof fetch {
  if (ledger === null) return fetchImpl;
  return async (input, init) => {
    const response = await fetchImpl(input, init);
    const url = input instanceof Request ? input.url : String(input);
    if (!/\/app\/installations\/[^/]+\/access_tokens$/.test(new URL(url).pathname)) {
      await ledger.observe({ counted: response.status !== 304, headroom: headroomOf(response.headers) }).catch((err: unknown) => {
        log("github.usage_unrecorded", { reason: String(err) });
      });
    }
    return response;
  };
}

/** The rate limit an answer states (x-ratelimit-*), or null when it states none. */
function headroomOf(headers: Headers): Headroom | null {
  const remaining = Number(headers.get("x-ratelimit-remaining"));
  const limit = Number(headers.get("x-ratelimit-limit"));
  const reset = Number(headers.get("x-ratelimit-reset"));
  if (!headers.has("x-ratelimit-remaining") || !Number.isFinite(remaining) || !Number.isFinite(limit)) return null;
  return { remaining, limit, resetAtMs: Number.isFinite(reset) && reset > 0 ? reset * 1_000 : 0 };
}

/** fetch held to the outbound policy, redirects included (at most GITHUB_REDIRECTS_MAX, each target checked). */
function policedFetch(fetchImpl: typeof fetch, config: Config): typeof fetch {
  const policy = outboundPolicy(config);
  // Octokit passes the URL as a string and the rest in `init`.
  return async (input, init) => {
    const url = input instanceof Request ? input.url : input;
    const res = await fetchOutbound(policy, url, init ?? {}, { redirectsMax: config.githubRedirectsMax, fetchImpl });
    // Octokit would take a redirect's answer for the resource itself.
    if (res.status >= 300 && res.status < 400 && res.headers.has("location")) {
      throw new Error(`GitHub redirected more than GITHUB_REDIRECTS_MAX (${config.githubRedirectsMax}) times`);
    }
    return res;
  };
}

/**
 * fetch with a time bound per request, body included: the answer is read whole within the bound,
 * so a body that stalls fails as GitHubTimeout (retried like a 5xx) instead of reaching Octokit,
 * which would take a broken body for an empty answer.
 */
function boundedFetch(fetchImpl: typeof fetch, timeoutMs: number): typeof fetch {
  return async (input, init) => {
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = init?.signal ? AbortSignal.any([init.signal, timeout]) : timeout;
    try {
      const response = await fetchImpl(input, { ...init, signal });
      const body = NULL_BODY_STATUSES.has(response.status) ? null : await response.arrayBuffer();
      return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
    } catch (err) {
      if (timeout.aborted) throw new GitHubTimeout(timeoutMs);
      throw err;
    }
  };
}
const NULL_BODY_STATUSES = new Set([101, 204, 205, 304]);

interface OctokitErrorShape {
  status?: number;
  message?: string;
  cause?: unknown;
  request?: { url?: string };
  response?: { headers?: Record<string, string | undefined> };
}

/** Octokit's error (after its retries) as a GitHubError that says why, in words a person can act on. */
export function toGitHubError(err: unknown, what: string): GitHubError {
  if (err instanceof GitHubError) return err;
  const e = (typeof err === "object" && err !== null ? err : {}) as OctokitErrorShape;
  const status = typeof e.status === "number" ? e.status : null;
  const headers = e.response?.headers ?? {};
  if (e.cause instanceof OutboundRefused) return new GitHubError("forbidden", `${what}: GitHub's redirect was not followed, ${e.cause.reason}`);
  if (e.cause instanceof GitHubTimeout || err instanceof GitHubTimeout) {
    const timeout = err instanceof GitHubTimeout ? err : (e.cause as GitHubTimeout);
    return new GitHubError("timeout", `${what}: ${timeout.message}, on every try`, null);
  }
  if (status === 429 || (status === 403 && (headers["x-ratelimit-remaining"] === "0" || /rate limit/i.test(e.message ?? "")))) {
    const retryAfterMs = rateLimitWaitMs(headers);
    const when = retryAfterMs === null ? "later" : `in ${Math.ceil(retryAfterMs / 1_000)} s`;
    return new GitHubError("rate_limited", `${what}: GitHub's rate limit is exhausted; it can be tried again ${when}`, status, retryAfterMs);
  }
  // No answer at all (a refused connection, a name that does not resolve): Octokit reports a 500
  // without a response. That says nothing about the App's credentials, even on a token request.
  if (e.response === undefined && e.cause !== undefined) {
    const where = e.request?.url ? ` at ${new URL(e.request.url).origin}` : "";
    return new GitHubError("unavailable", `${what}: could not reach GitHub${where}: ${e.message ?? "no answer"}`, null);
  }
  if (status !== null && /\/app\/installations\/[^/]+\/access_tokens$/.test(e.request?.url ?? "")) {
    return new GitHubError("unauthorized", `${what}: GitHub refused an installation token for the App (${status}): check the App id, installation id and private key`, status);
  }
  if (status === 401) return new GitHubError("unauthorized", `${what}: GitHub refused the App installation's credentials (401)`, status);
  if (status === 403 || status === 404) {
    return new GitHubError("forbidden", `${what}: GitHub answered ${status}; the App installation cannot read it`, status);
  }
  const detail = e.message ? `: ${e.message}` : "";
  return new GitHubError("unavailable", `${what}: GitHub failed${status ? ` with ${status}` : ""}${detail}`, status);
}

/** How long GitHub asked to wait: `retry-after` seconds, else until `x-ratelimit-reset` (epoch seconds). */
function rateLimitWaitMs(headers: Record<string, string | undefined>): number | null {
  const retryAfter = Number(headers["retry-after"]);
  if (headers["retry-after"] !== undefined && Number.isFinite(retryAfter)) return Math.max(0, retryAfter * 1_000);
  const reset = Number(headers["x-ratelimit-reset"]);
  if (headers["x-ratelimit-reset"] !== undefined && Number.isFinite(reset)) return Math.max(0, reset * 1_000 - Date.now());
  return null;
}
