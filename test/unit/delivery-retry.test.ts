// What follows a delivery's attempt (src/queue/delivery.ts, afterAttempt): one decision for a
// completion callback and a tracker delivery alike, from how the attempt went, its number and the
// round of its kind (callbackRound, trackerRound).

import { describe, expect, it } from "vitest";
import { callbackRound } from "../../src/callbacks/deliveries";
import { DEFAULTS } from "../../src/config";
import { afterAttempt } from "../../src/queue/delivery";
import { QUEUE_DELAY_MAX_S } from "../../src/queue/messages";
import { trackerRound } from "../../src/tracker/receipts";

const rounds = [
  ["a completion callback", callbackRound({ ...DEFAULTS, callbackMaxAttempts: 4, callbackBackoffBaseMs: 1_000, callbackBackoffMaxMs: 5_000 })],
  ["a tracker delivery", trackerRound({ ...DEFAULTS, trackerDeliveryMaxAttempts: 4, trackerDeliveryBackoffBaseMs: 1_000, trackerDeliveryBackoffMaxMs: 5_000 })],
] as const;

describe.each(rounds)("after an attempt of %s", (_kind, round) => {
  it("a delivered attempt is done: the message is acknowledged and no retry is due", () => {
    expect(afterAttempt({ ok: true }, 1, round)).toEqual({ status: "delivered", retryInS: null, outcome: { ack: true } });
  });

  it("a failed attempt is retried after base * 2^(attempt-1) seconds, capped at the round's longest backoff", () => {
    expect([1, 2, 3].map((attempt) => afterAttempt({ ok: false }, attempt, round))).toEqual([
      { status: "pending", retryInS: 1, outcome: { ack: false, delaySeconds: 1 } },
      { status: "pending", retryInS: 2, outcome: { ack: false, delaySeconds: 2 } },
      { status: "pending", retryInS: 4, outcome: { ack: false, delaySeconds: 4 } },
    ]);
  });

  it("the round's last attempt gives up: the receipt fails and the message is acknowledged", () => {
    expect(afterAttempt({ ok: false }, 4, round)).toEqual({ status: "failed", retryInS: null, outcome: { ack: true } });
  });

  it("an error no later attempt can better gives up at once, with attempts left", () => {
    expect(afterAttempt({ ok: false, final: true }, 1, round)).toEqual({ status: "failed", retryInS: null, outcome: { ack: true } });
  });
});

describe("the queue's delay", () => {
  it("never exceeds the queue's longest delay, however long the configured backoff", () => {
    const round = callbackRound({ ...DEFAULTS, callbackMaxAttempts: 100, callbackBackoffBaseMs: 3_600_000, callbackBackoffMaxMs: 604_800_000 });
    expect(afterAttempt({ ok: false }, 10, round).retryInS).toBe(QUEUE_DELAY_MAX_S);
  });

  it("a callback and a tracker delivery with the same round back off alike, from the configured defaults", () => {
    expect(afterAttempt({ ok: false }, 2, callbackRound(DEFAULTS)).retryInS).toBe(Math.ceil((DEFAULTS.callbackBackoffBaseMs * 2) / 1_000));
    expect(afterAttempt({ ok: false }, 2, trackerRound(DEFAULTS)).retryInS).toBe(Math.ceil((DEFAULTS.trackerDeliveryBackoffBaseMs * 2) / 1_000));
  });
});
