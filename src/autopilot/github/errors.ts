// Why a GitHub call failed, in terms admission can act on and show to people: the provider turns
// Octokit's errors into these, so the core never reads HTTP statuses or Octokit internals.

export type GitHubFailure =
  /** No answer within GITHUB_REQUEST_TIMEOUT_MS, on every try. */
  | "timeout"
  /** Rate limited and the wait GitHub asked for was longer than GITHUB_RATE_LIMIT_WAIT_MAX_MS (or the tries ran out). */
  | "rate_limited"
  /** GitHub refused the App's credentials or the installation token (401, or the token request failed). */
  | "unauthorized"
  /** GitHub refused the read (403/404 on an endpoint the provider cannot do without). */
  | "forbidden"
  /** More pages than GITHUB_PAGES_MAX allows one call to read. */
  | "too_many_pages"
  /** Any other failure that outlasted the retries: 5xx, a network error, an unreadable answer. */
  | "unavailable";

export class GitHubError extends Error {
  constructor(
    readonly failure: GitHubFailure,
    message: string,
    /** GitHub's HTTP status, when it answered. */
    readonly status: number | null = null,
    /** When GitHub said to try again, in ms from now (rate limits). */
    readonly retryAfterMs: number | null = null,
  ) {
    super(message);
    this.name = "GitHubError";
  }
}

/** Thrown by the provider's fetch when one request outlives its time bound (retried like a 5xx). */
export class GitHubTimeout extends Error {
  constructor(readonly timeoutMs: number) {
    super(`GitHub did not answer within ${timeoutMs} ms`);
    this.name = "GitHubTimeout";
  }
}
