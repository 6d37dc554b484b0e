// Why a Linear call failed, in the same terms as GitHub's (src/autopilot/github/errors.ts), so a
// project's and a ticket's last error read alike whichever tracker failed (src/autopilot/last-error.ts).

import { LinearError as SdkError, LinearErrorType } from "@linear/sdk";
import type { GitHubFailure } from "../github/errors";

export type LinearFailure = GitHubFailure;

export class LinearError extends Error {
  constructor(
    readonly failure: LinearFailure,
    message: string,
    /** A network error, a timeout or a 5xx: worth another try. */
    readonly retryable = false,
    /** Linear found no such entity (or the key may not see it). */
    readonly notFound = false,
  ) {
    super(message);
    this.name = "LinearError";
  }
}

const BY_TYPE: Partial<Record<LinearErrorType, LinearFailure>> = {
  [LinearErrorType.Ratelimited]: "rate_limited",
  [LinearErrorType.AuthenticationError]: "unauthorized",
  [LinearErrorType.Forbidden]: "forbidden",
  [LinearErrorType.FeatureNotAccessible]: "forbidden",
};

/** The SDK's error (or fetch's own) as a LinearError. */
export function linearFailure(err: unknown, timeoutMs: number): LinearError {
  if (err instanceof SdkError) {
    const message = `Linear refused the request: ${err.errors?.[0]?.message ?? err.message}`.slice(0, 500);
    if (/entity not found/i.test(message)) return new LinearError("forbidden", message, false, true);
    const status = err.status ?? 0;
    if (status >= 500 || err.type === LinearErrorType.InternalError || err.type === LinearErrorType.LockTimeout) return new LinearError("unavailable", message, true);
    return new LinearError((err.type && BY_TYPE[err.type]) || (status === 401 ? "unauthorized" : "unavailable"), message);
  }
  if (err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError")) {
    return new LinearError("timeout", `Linear did not answer within ${timeoutMs} ms`, true);
  }
  return new LinearError("unavailable", `Linear could not be reached: ${err instanceof Error ? err.message : String(err)}`, true);
}
