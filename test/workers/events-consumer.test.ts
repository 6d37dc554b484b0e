// The outbox consumer stores each (run, seq) once however often and in whatever order the Queue
// delivers it, acknowledges message by message, and leaves what it cannot handle to the Queue's
// retries and then the dead-letter queue (../shared/spec/build-lifecycle.md, "Events and completion
// retry independently"; ../shared/DESIGN.md, invariant 6).

import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
// @ts-ignore: Vite's ?raw import gives the file's text.
import wranglerToml from "../../wrangler.toml?raw";
import { DEFAULTS } from "../../src/config";
import type { OutboxMessage } from "../../src/env";
import worker from "../../src/index";
import { logLines, storedSeqs, waitFor } from "./events-helpers";

const ORG = "org_000000000000000000000001";
let runCounter = 0;
/** A run id no run object has: these tests are about the consumer alone. */
const newRunId = () => `run_${(0xabc000 + ++runCounter).toString(16).padStart(24, "0")}`;

function event(runId: string, seq: number): OutboxMessage {
  const types = ["run.created", "run.state", "run.output", "run.phase"];
  return { run_id: runId, org_id: ORG, seq, type: types[(seq - 1) % types.length], at_ms: 1_000 + seq, attempt: 0, data: { run_id: runId, n: seq, attempt: 0 } };
}

type TestMessage = Parameters<typeof createMessageBatch>[1][number];

let nextId = 0;
function message(body: unknown, attempts = 1): TestMessage {
  return { id: `msg-${++nextId}`, timestamp: new Date(), attempts, body };
}

async function deliver(messages: TestMessage[], watch?: (m: Message<unknown>) => void) {
  const batch = createMessageBatch("docket-events", messages);
  if (watch) batch.messages.forEach(watch);
  const ctx = createExecutionContext();
  await worker.queue(batch as MessageBatch<OutboxMessage>, env);
  return getQueueResult(batch, ctx);
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("the outbox consumer", () => {
  it("duplicate and out-of-order deliveries store each event once, and every message is acknowledged", async () => {
    const log = vi.spyOn(console, "log");
    const runId = newRunId();
    const first = [message(event(runId, 3)), message(event(runId, 1)), message(event(runId, 3)), message(event(runId, 2))];
    const result = await deliver(first);
    expect(result.outcome).toBe("ok");
    expect(result.retryBatch.retry).toBe(false);
    expect(result.retryMessages).toEqual([]);
    expect([...result.explicitAcks].sort()).toEqual(first.map((m) => m.id).sort());

    // The Queue delivers some of them again (at least once means sometimes twice).
    const again = [message(event(runId, 1), 2), message(event(runId, 2), 3)];
    const second = await deliver(again);
    expect([...second.explicitAcks].sort()).toEqual(again.map((m) => m.id).sort());

    const rows = await env.DB.prepare("SELECT seq, org_id, type, data, at_ms FROM events WHERE run_id = ? ORDER BY seq")
      .bind(runId)
      .all<{ seq: number; org_id: string; type: string; data: string; at_ms: number }>();
    expect(rows.results.map((r) => ({ ...r, data: JSON.parse(r.data) }))).toEqual(
      [1, 2, 3].map((seq) => {
        const e = event(runId, seq);
        return { seq, org_id: ORG, type: e.type, data: e.data, at_ms: e.at_ms };
      }),
    );

    // One log line per delivery, saying whether it stored the event or found it stored.
    const lines = logLines(log.mock.calls, "outbox.consumed").filter((l) => l.run === runId);
    expect(lines.every((l) => l.attempt === 0)).toBe(true);
    expect(lines.map((l) => [l.seq, l.try, l.reason])).toEqual([
      [3, 1, "stored"],
      [1, 1, "stored"],
      [3, 1, "duplicate"],
      [2, 1, "stored"],
      [1, 2, "duplicate"],
      [2, 3, "duplicate"],
    ]);
  });

  it("a batch's events are stored in one D1 round trip, and each on its own when that round trip fails", async () => {
    const log = vi.spyOn(console, "log");
    const batches = vi.spyOn(env.DB, "batch");
    const runId = newRunId();
    const first = [1, 2, 3, 4].map((seq) => message(event(runId, seq)));
    expect([...(await deliver(first)).explicitAcks].sort()).toEqual(first.map((m) => m.id).sort());
    expect(batches).toHaveBeenCalledTimes(1);
    expect(batches.mock.calls[0][0]).toHaveLength(4);

    // D1 refuses the batch: every event is still stored, once, and acknowledged.
    batches.mockRejectedValueOnce(new Error("D1_ERROR: the database is overloaded"));
    const second = [5, 6, 4].map((seq) => message(event(runId, seq), 2));
    expect([...(await deliver(second)).explicitAcks].sort()).toEqual(second.map((m) => m.id).sort());
    expect(await storedSeqs(runId)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(logLines(log.mock.calls, "outbox.batch_store_failed")).toEqual([expect.objectContaining({ count: 3, reason: expect.stringContaining("overloaded") })]);
    const reasons = logLines(log.mock.calls, "outbox.consumed").filter((l) => l.run === runId).map((l) => [l.seq, l.reason]);
    expect(reasons.slice(4)).toEqual([
      [5, "stored"],
      [6, "stored"],
      [4, "duplicate"],
    ]);
  });

  it("a message it cannot handle is retried alone, with exponential backoff; the rest of the batch is acknowledged", async () => {
    const runId = newRunId();
    const good1 = message(event(runId, 1));
    const malformed = message({ run_id: runId, org_id: ORG, type: "run.state" }); // no seq
    const good2 = message(event(runId, 2));
    const malformedLater = message({ nonsense: true }, 4);
    const delays: Record<string, unknown> = {};
    const result = await deliver([good1, malformed, good2, malformedLater], (m) => {
      const retry = m.retry.bind(m);
      m.retry = (options?: QueueRetryOptions) => {
        delays[m.id] = options?.delaySeconds;
        retry(options);
      };
    });
    expect([...result.explicitAcks].sort()).toEqual([good1.id, good2.id].sort());
    expect(result.retryMessages.map((m: { msgId: string }) => m.msgId)).toEqual([malformed.id, malformedLater.id]);
    expect(result.retryBatch.retry).toBe(false);
    expect(await storedSeqs(runId)).toEqual([1, 2]);
    // Each retry waits base * 2^(attempts-1).
    expect(delays).toEqual({
      [malformed.id]: DEFAULTS.queueRetryBaseMs / 1000,
      [malformedLater.id]: (DEFAULTS.queueRetryBaseMs / 1000) * 2 ** 3,
    });
  });

  it("through the real Queue: events sent twice and out of order are stored once each", async () => {
    const log = vi.spyOn(console, "log");
    const runId = newRunId();
    const sends = [2, 1, 3, 2, 1, 3, 3];
    await env.EVENTS.sendBatch(sends.map((seq) => ({ body: event(runId, seq), contentType: "json" as const })));
    await waitFor("every delivery to be consumed", async () =>
      logLines(log.mock.calls, "outbox.consumed").filter((l) => l.run === runId).length === sends.length ? true : undefined,
    );
    expect(await storedSeqs(runId)).toEqual([1, 2, 3]);
    const reasons = logLines(log.mock.calls, "outbox.consumed")
      .filter((l) => l.run === runId)
      .map((l) => l.reason);
    expect(reasons.filter((r) => r === "stored")).toHaveLength(3);
    expect(reasons.filter((r) => r === "duplicate")).toHaveLength(4);
  });

  it("wrangler.toml sends what keeps failing to the dead-letter queue, after enough retries for every callback attempt", () => {
    const consumer = /\[\[queues\.consumers\]\]\s*\nqueue = "docket-events"\n([\s\S]*?)(?:\n\n|\n\[)/.exec(wranglerToml as string);
    expect(consumer).not.toBeNull();
    const settings = Object.fromEntries(
      consumer![1]
        .split("\n")
        .map((line) => /^(\w+) = "?([^"]*)"?$/.exec(line.trim()))
        .filter((m): m is RegExpExecArray => m !== null)
        .map((m) => [m[1], m[2]]),
    );
    expect(settings.dead_letter_queue).toBe("docket-events-dlq");
    const maxRetries = Number(settings.max_retries);
    const callbackAttempts = Number(/CALLBACK_MAX_ATTEMPTS = "(\d+)"/.exec(wranglerToml as string)?.[1]);
    expect(callbackAttempts).toBe(DEFAULTS.callbackMaxAttempts);
    // Each failed callback attempt is one retry of its message.
    expect(maxRetries).toBeGreaterThanOrEqual(callbackAttempts - 1);
  });
});
