// Bounded exponential backoff with jitter (docs/protocol.md, "Errors": a runner backs off with
// jitter on anything that is not definitive). Pure: the random source is injected. The curve is
// the one the Worker's retries use (src/lib/backoff.ts); the runner keeps its own policy values.

import { exponentialBackoffMs } from '../../src/lib/backoff.js';

/**
 * The delay before retry number `failures` (1 for the first retry).
 * "Equal jitter": half of the exponential step is fixed, half is random, so a delay is never
 * zero (no hot loop against a failing server) and never above `maxMs`.
 * @param failures consecutive failures so far, >= 1
 * @returns milliseconds, in [min(baseMs, maxMs)/2, maxMs]
 */
export function backoffDelayMs(failures: number, { baseMs, maxMs, random = Math.random }: { baseMs: number; maxMs: number; random?: () => number }): number {
  if (!(baseMs > 0) || !(maxMs > 0)) throw new RangeError('backoff base and max must be positive');
  const n = Math.max(1, Math.floor(failures) || 1);
  // The exponent stops at 31 doublings: 2^32 * base overflows any max.
  return exponentialBackoffMs({ baseMs, maxMs, maxDoublings: 31, jitter: 'equal' }, n - 1, random());
}

/** Tracks consecutive failures of one kind of call and hands out the next delay. */
export class Backoff {
  failures: number;
  opts: { baseMs: number; maxMs: number; random?: () => number };
  constructor(opts: { baseMs: number; maxMs: number; random?: () => number }) {
    this.opts = opts;
    this.failures = 0;
  }
  /** @returns the delay to wait before the next try */
  fail(): number {
    this.failures += 1;
    return backoffDelayMs(this.failures, this.opts);
  }
  succeed() {
    this.failures = 0;
  }
}
