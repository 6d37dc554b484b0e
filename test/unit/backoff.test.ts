// The shared backoff (src/lib/backoff.ts) and each retry that uses it: the numbers are those each
// retry computed with its own formula before they shared one (the oracles below restate them).

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { callbackRound } from "../../src/callbacks/deliveries";
import { DEFAULTS } from "../../src/config";
import { exponentialBackoffMs } from "../../src/lib/backoff";
import { retryBackoffMs } from "../../src/queue/delivery";
import { QUEUE_DELAY_MAX_S, queueRetryDelaySeconds } from "../../src/queue/messages";
import { backoffMs } from "../../src/run/rules/draft";
import { publishRetryMs } from "../../durable-objects/outbox";

describe("exponentialBackoffMs", () => {
  it("doubles from the base, step 0 being the base itself", () => {
    expect([0, 1, 2, 3].map((n) => exponentialBackoffMs({ baseMs: 1_000 }, n))).toEqual([1_000, 2_000, 4_000, 8_000]);
  });

  it("treats a negative step as step 0", () => {
    expect(exponentialBackoffMs({ baseMs: 1_000 }, -5)).toBe(1_000);
  });

  it("caps the delay at maxMs", () => {
    expect(exponentialBackoffMs({ baseMs: 1_000, maxMs: 5_000 }, 3)).toBe(5_000);
    expect(exponentialBackoffMs({ baseMs: 1_000, maxMs: 5_000 }, 2)).toBe(4_000);
  });

  it("caps the exponent at maxDoublings, so a huge step stays finite without maxMs", () => {
    expect(exponentialBackoffMs({ baseMs: 1_000, maxDoublings: 4 }, 10_000)).toBe(16_000);
    expect(exponentialBackoffMs({ baseMs: 1_000 }, 10_000)).toBe(Infinity);
  });

  it("equal jitter puts the delay in [d/2, d], rounded, with random clamped to [0, 1]", () => {
    const p = { baseMs: 1_000, maxMs: 10_000, jitter: "equal" as const };
    expect(exponentialBackoffMs(p, 2, 0)).toBe(2_000);
    expect(exponentialBackoffMs(p, 2, 1)).toBe(4_000);
    expect(exponentialBackoffMs(p, 2, 0.3333)).toBe(2_667);
    expect(exponentialBackoffMs(p, 2, -1)).toBe(2_000);
    expect(exponentialBackoffMs(p, 2, 7)).toBe(4_000);
    expect(exponentialBackoffMs(p, 9, 0)).toBe(5_000);
  });

  it("ignores random without jitter", () => {
    expect(exponentialBackoffMs({ baseMs: 1_000 }, 1, 0)).toBe(2_000);
  });
});

const ms = fc.integer({ min: 1, max: 10_000_000 });
const step = fc.integer({ min: -3, max: 2_000 });

describe("each retry keeps its numbers", () => {
  it("launch failures (decide.ts): base * 2^(attempt-1), capped, equal jitter", () => {
    fc.assert(
      fc.property(ms, ms, step, fc.double({ min: -1, max: 2, noNaN: true }), (base, max, attempt, jitter) => {
        const config = { ...DEFAULTS, backoffBaseMs: base, backoffMaxMs: max };
        const exp = Math.min(max, base * 2 ** Math.max(0, attempt - 1));
        expect(backoffMs(config, attempt, jitter)).toBe(Math.round(exp / 2 + (exp / 2) * Math.min(1, Math.max(0, jitter))));
      }),
    );
    expect(backoffMs(DEFAULTS, 1, 0)).toBe(DEFAULTS.backoffBaseMs / 2);
    expect(backoffMs(DEFAULTS, 3, 1)).toBe(DEFAULTS.backoffBaseMs * 4);
  });

  it("event publishing (outbox.ts): base * 2^attempts, exponent at most 16, no cap", () => {
    fc.assert(
      fc.property(ms, fc.integer({ min: 1, max: 2_000 }), (base, attempts) => {
        expect(publishRetryMs({ outboxBackoffMs: base }, attempts)).toBe(base * 2 ** Math.min(attempts, 16));
      }),
    );
    expect(publishRetryMs(DEFAULTS, 1)).toBe(DEFAULTS.outboxBackoffMs * 2);
  });

  it("queue redelivery (queue/messages.ts): base * 2^(attempts-1), capped, in whole seconds up to the queue's limit", () => {
    fc.assert(
      fc.property(ms, ms, step, (base, max, attempts) => {
        const config = { ...DEFAULTS, queueRetryBaseMs: base, queueRetryMaxMs: max };
        const old = Math.min(max, base * 2 ** Math.min(Math.max(0, attempts - 1), 30));
        expect(queueRetryDelaySeconds(config, attempts)).toBe(Math.min(QUEUE_DELAY_MAX_S, Math.ceil(old / 1_000)));
      }),
    );
  });

  it("completion callbacks (callbacks/deliveries.ts): base * 2^(attempt-1), capped", () => {
    const callbackBackoffMs = (config: typeof DEFAULTS, attempt: number) => retryBackoffMs(callbackRound(config).backoff, attempt);
    fc.assert(
      fc.property(ms, ms, step, (base, max, attempt) => {
        const config = { ...DEFAULTS, callbackBackoffBaseMs: base, callbackBackoffMaxMs: max };
        expect(callbackBackoffMs(config, attempt)).toBe(Math.min(max, base * 2 ** Math.min(Math.max(0, attempt - 1), 30)));
      }),
    );
    expect(callbackBackoffMs(DEFAULTS, 2)).toBe(DEFAULTS.callbackBackoffBaseMs * 2);
  });
});
