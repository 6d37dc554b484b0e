// The one exponential backoff every retry in the Worker uses (launch failures, event publishing,
// queue redelivery, completion callbacks); each caller keeps its own policy and step count.

export interface BackoffPolicy {
  /** The delay of step 0. */
  baseMs: number;
  /** The cap on the delay, before jitter; none when absent. */
  maxMs?: number;
  /** The cap on the exponent, so a huge step count stays a finite number; none when absent. */
  maxDoublings?: number;
  /** "equal": the delay d becomes d/2 + d/2 * random, so it lies in [d/2, d] (rounded to a whole ms). */
  jitter?: "equal";
}

/**
 * baseMs * 2^doublings with the exponent clamped to [0, maxDoublings] and the result capped at
 * maxMs, then jittered when the policy says so. `random` is in [0, 1] (clamped), used only for jitter.
 */
export function exponentialBackoffMs(policy: BackoffPolicy, doublings: number, random = 1): number {
  const exponent = Math.min(Math.max(0, doublings), policy.maxDoublings ?? Infinity);
  const ms = Math.min(policy.maxMs ?? Infinity, policy.baseMs * 2 ** exponent);
  if (policy.jitter !== "equal") return ms;
  return Math.round(ms / 2 + (ms / 2) * Math.min(1, Math.max(0, random)));
}
