// Linear's GraphQL API for one project: @linear/sdk's LinearGraphQLClient (its small isomorphic
// client, not the generated LinearClient with every model, which the Worker does not need) sending
// Docket's own few queries. Each request is bounded (LINEAR_REQUEST_TIMEOUT_MS), retried on a
// network error, a timeout or a 5xx (LINEAR_RETRIES), and its answer's rate-limit headers are kept:
// Linear counts requests and query complexity per hour per key
// (https://linear.app/developers/rate-limiting: X-RateLimit-Requests-*, X-RateLimit-Complexity-*).

import { LinearGraphQLClient } from "@linear/sdk";
import type { Config } from "../../config";
import type { Headroom } from "../provider";
import { LinearError, linearFailure } from "./errors";

export interface LinearClient {
  /** One GraphQL operation's data; a LinearError when Linear refuses it or cannot be reached. */
  request<T>(query: string, variables: Record<string, unknown>): Promise<T>;
  /** Linear's hourly budget as its last answer stated it (headroomOf); null before any. */
  headroom(): Headroom | null;
}

/** A personal API key goes as is; an OAuth access token as a Bearer token (Linear's "Authentication"). */
function authorization(token: string): string {
  return token.startsWith("lin_api_") ? token : `Bearer ${token}`;
}

/**
 * The budget a response's headers state, in requests (what the reconciliation reserve counts), or
 * null when it states none. When the complexity budget is the tighter of the two, the requests
 * left are scaled down to its share: 10% of the complexity left is 10% of the requests.
 */
export function headroomOf(headers: Headers | undefined): Headroom | null {
  if (!headers) return null;
  const budget = (kind: string) => {
    const remaining = Number(headers.get(`x-ratelimit-${kind}-remaining`));
    const limit = Number(headers.get(`x-ratelimit-${kind}-limit`));
    const reset = Number(headers.get(`x-ratelimit-${kind}-reset`));
    if (!headers.has(`x-ratelimit-${kind}-remaining`) || !Number.isFinite(remaining) || !(limit > 0)) return null;
    return { remaining, limit, resetAtMs: Number.isFinite(reset) ? reset : 0 };
  };
  const requests = budget("requests");
  const complexity = budget("complexity");
  if (!requests) return null;
  const of = "the Linear API key";
  if (!complexity || complexity.remaining / complexity.limit >= requests.remaining / requests.limit) return { ...requests, of };
  return { remaining: Math.floor((requests.limit * complexity.remaining) / complexity.limit), limit: requests.limit, resetAtMs: Math.max(requests.resetAtMs, complexity.resetAtMs), of };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export function linearClient(settings: { apiUrl: string; token: string }, config: Config): LinearClient {
  let last: Headroom | null = null;
  const once = async <T>(query: string, variables: Record<string, unknown>): Promise<T> => {
    const client = new LinearGraphQLClient(settings.apiUrl, {
      headers: { Authorization: authorization(settings.token) },
      signal: AbortSignal.timeout(config.linearRequestTimeoutMs),
    });
    try {
      const answer = await client.rawRequest<T, Record<string, unknown>>(query, variables);
      last = headroomOf(answer.headers) ?? last;
      return answer.data as T;
    } catch (err) {
      last = headroomOf((err as { response?: { headers?: Headers } }).response?.headers) ?? last;
      throw linearFailure(err, config.linearRequestTimeoutMs);
    }
  };
  return {
    async request<T>(query: string, variables: Record<string, unknown>): Promise<T> {
      for (let attempt = 0; ; attempt += 1) {
        try {
          return await once<T>(query, variables);
        } catch (err) {
          const retry = err instanceof LinearError && err.retryable && attempt < config.linearRetries;
          if (!retry) throw err;
          await sleep((attempt + 1) ** 2 * config.linearRetryBaseMs);
        }
      }
    },
    headroom: () => last,
  };
}
