// Bounded exponential backoff with jitter (docs/protocol.md, "Errors": a runner backs off with
// jitter on anything that is not definitive). Pure: the random source is injected.

/**
 * The delay before retry number `failures` (1 for the first retry).
 * "Equal jitter": half of the exponential step is fixed, half is random, so a delay is never
 * zero (no hot loop against a failing server) and never above `maxMs`.
 * @param {number} failures consecutive failures so far, >= 1
 * @param {{ baseMs: number, maxMs: number, random?: () => number }} opts
 * @returns {number} milliseconds, in [min(baseMs, maxMs)/2, maxMs]
 */
export function backoffDelayMs(failures, { baseMs, maxMs, random = Math.random }) {
  if (!(baseMs > 0) || !(maxMs > 0)) throw new RangeError('backoff base and max must be positive');
  const n = Math.max(1, Math.min(Math.floor(failures) || 1, 32)); // 2^32 * base overflows any max
  const step = Math.min(maxMs, baseMs * 2 ** (n - 1));
  const r = Math.min(Math.max(random(), 0), 1);
  return Math.round(step / 2 + (step / 2) * r);
}

/** Tracks consecutive failures of one kind of call and hands out the next delay. */
export class Backoff {
  /** @param {{ baseMs: number, maxMs: number, random?: () => number }} opts */
  constructor(opts) {
    this.opts = opts;
    this.failures = 0;
  }
  /** @returns {number} the delay to wait before the next try */
  fail() {
    this.failures += 1;
    return backoffDelayMs(this.failures, this.opts);
  }
  succeed() {
    this.failures = 0;
  }
}
