import { describe, expect, it } from 'vitest';
import { Backoff, backoffDelayMs } from '../src/backoff.ts';

describe('backoff with jitter', () => {
  it('stays within [step/2, step] and never exceeds the maximum, whatever the random source says', () => {
    const opts = { baseMs: 1000, maxMs: 60_000 };
    for (let failures = 1; failures <= 40; failures++) {
      const step = Math.min(60_000, 1000 * 2 ** (failures - 1));
      for (const r of [0, 0.25, 0.5, 0.999, 1, -5, 7]) {
        const d = backoffDelayMs(failures, { ...opts, random: () => r });
        expect(d).toBeGreaterThanOrEqual(step / 2);
        expect(d).toBeLessThanOrEqual(step);
        expect(d).toBeLessThanOrEqual(60_000);
      }
    }
  });

  it('grows exponentially until the cap', () => {
    const at = (n) => backoffDelayMs(n, { baseMs: 100, maxMs: 1000, random: () => 1 });
    expect([1, 2, 3, 4, 5, 6].map(at)).toEqual([100, 200, 400, 800, 1000, 1000]);
  });

  it('is never zero, so a failing server is not hammered', () => {
    expect(backoffDelayMs(1, { baseMs: 10, maxMs: 10, random: () => 0 })).toBe(5);
  });

  it('a success resets the count', () => {
    const b = new Backoff({ baseMs: 100, maxMs: 10_000, random: () => 1 });
    expect([b.fail(), b.fail(), b.fail()]).toEqual([100, 200, 400]);
    b.succeed();
    expect(b.fail()).toBe(100);
  });

  it('refuses a non-positive base or maximum', () => {
    expect(() => backoffDelayMs(1, { baseMs: 0, maxMs: 10 })).toThrow(RangeError);
  });
});
