// The log lines for `wrangler tail` share one schema (src/lib/log.ts; README.md, "Deploying"):
// every line about a run names the run, the run's attempt (never a publish, delivery or callback
// try count: those are `try` and `queue_try`), the event it is about (`seq`) and why it was written.
// A whole lifecycle is driven through the HTTP surface, the real Queue and the consumer; only the
// callback receiver is stubbed.

import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { OutboxMessage } from "../../src/env";
import worker from "../../src/index";
import { allEvents, createOrgWithSecret, finishRun, openStream, stubReceiver, waitFor } from "./events-helpers";
import { ageRun, attemptCall, call, claim, dispatch, getRun, registerRunner, report } from "./helpers";

type Json = Record<string, any>;

const RECEIVER = "https://receiver.example/log-schema";
const RUN_LINE = /^(run|outbox|callback|stream)\./;
/** Lines whose `seq` names the event they are about: their attempt is that event's attempt. */
const EVENT_LINES = new Set(["run.transition", "run.cancel_requested", "outbox.published", "outbox.stored", "outbox.consumed", "callback.scheduled", "callback.attempt"]);

let restore: (() => void) | null = null;
afterEach(() => {
  restore?.();
  restore = null;
  vi.restoreAllMocks();
});

/** Every structured line printed while `spy` watched console.log. */
function structuredLines(calls: unknown[][]): Json[] {
  return calls
    .map((args) => args[0])
    .filter((text): text is string => typeof text === "string" && text.startsWith('{"msg"'))
    .map((text) => JSON.parse(text));
}

describe("log lines", () => {
  it("every line about a run carries run, its attempt, seq where an event exists, and a reason, through a whole lifecycle", async () => {
    const log = vi.spyOn(console, "log");
    const receiver = stubReceiver(RECEIVER, () => new Response("ok"));
    restore = receiver.restore;
    const { admin } = await createOrgWithSecret();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin, { callback_url: RECEIVER });

    // Attempt 1 fails to launch and is requeued; attempt 2 launches, reports, and is cancelled.
    expect((await claim(runner.token, 0)).body.attempt).toBe(1);
    expect((await attemptCall(runner.token, runId, 1, "launch-failed", { error: "pull failed" })).body.state).toBe("queued");
    await ageRun(runId, 60_000);
    const second = await claim(runner.token, 0);
    expect(second.body.attempt).toBe(2);
    await attemptCall(runner.token, runId, 2, "launched", { sandbox_id: "sbx-2" });
    await report(second.body.attempt_token, runId, { phase: "implementing", lines: ["working"] });
    const cancel = await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: { reason: "not needed" } });
    expect(cancel.status).toBe(202);
    expect((await attemptCall(runner.token, runId, 2, "stopped", { sandbox_id: "sbx-2" })).body.state).toBe("cancelled");

    // Every event is stored, a claim's by its run object and the others by the consumer, and the completion callback is delivered.
    const events = await waitFor("every event stored", async () => {
      const all = await allEvents(admin, runId);
      const lines = structuredLines(log.mock.calls).filter((l) => l.run === runId);
      const stored = new Set(lines.filter((l) => l.msg === "outbox.consumed").map((l) => l.seq));
      for (const l of lines.filter((l) => l.msg === "outbox.stored")) for (let seq = l.seq; seq <= l.last_seq; seq++) stored.add(seq);
      return all.length > 0 && all.every((e) => stored.has(e.seq)) ? all : undefined;
    });
    await waitFor("the callback delivered", async () => ((await getRun(admin, runId)).callback?.status === "delivered" ? true : undefined));
    // A live stream of the ended run: opened, sent everything, closed.
    const stream = await openStream(admin, runId, { after: 0 });
    await stream.sse!.rest();

    const attemptOf = new Map(events.map((e) => [e.seq as number, e.data.attempt as number]));
    // Every event's data names its attempt, run.created too.
    expect(events[0]).toMatchObject({ type: "run.created", data: { attempt: 0 } });
    expect(events.every((e) => Number.isInteger(e.data.attempt))).toBe(true);
    const lines = structuredLines(log.mock.calls).filter((l) => RUN_LINE.test(l.msg) && l.run === runId);
    const seen = new Set(lines.map((l) => l.msg));
    for (const msg of ["run.transition", "run.cancel_requested", "outbox.published", "outbox.stored", "outbox.consumed", "callback.scheduled", "callback.attempt", "stream.opened", "stream.closed"]) {
      expect(seen, msg).toContain(msg);
    }
    for (const line of lines) {
      expect(Number.isInteger(line.attempt), `${line.msg} attempt`).toBe(true);
      expect(typeof line.reason === "string" && line.reason.length > 0, `${line.msg} reason`).toBe(true);
      if (/^(outbox|callback)\./.test(line.msg)) expect(line, `${line.msg} seq`).toHaveProperty("seq");
      if (EVENT_LINES.has(line.msg)) {
        expect(attemptOf.has(line.seq), `${line.msg} names event ${line.seq}`).toBe(true);
        expect(line.attempt, `${line.msg} at seq ${line.seq}`).toBe(attemptOf.get(line.seq));
      }
    }
    // Both attempts appear, and try counts have their own names.
    expect(new Set(lines.filter((l) => l.msg === "run.transition").map((l) => l.attempt))).toEqual(new Set([0, 1, 2]));
    expect(lines.filter((l) => l.msg === "outbox.published").every((l) => l.try === 1)).toBe(true);
    expect(lines.filter((l) => l.msg === "callback.attempt").map((l) => [l.attempt, l.try, l.outcome])).toEqual([[2, 1, "delivered"]]);

    // The cancel request is one line: who, why, and that the runner was asked to stop.
    const cancelLines = lines.filter((l) => l.msg === "run.cancel_requested");
    expect(cancelLines).toHaveLength(1);
    expect(cancelLines[0]).toMatchObject({ attempt: 2, reason: "not needed", immediate: false, outcome: "stop_requested", state: "implementing" });
    expect(cancelLines[0].by).toMatch(/^member:tok_/);
    expect(events.find((e) => e.seq === cancelLines[0].seq)?.type).toBe("run.stop_requested");
  });

  it("a cancel of a queued run logs an immediate cancel; a refused one logs its refusal", async () => {
    const log = vi.spyOn(console, "log");
    const { admin } = await createOrgWithSecret();
    const runId = await dispatch(admin);
    expect((await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: {} })).status).toBe(200);
    const done = await dispatch(admin);
    const runner = await registerRunner(admin);
    const c = await claim(runner.token, 0);
    await attemptCall(runner.token, done, 1, "launched", { sandbox_id: "sbx" });
    await report(c.body.attempt_token, done, { final: { outcome: "failed", error: "x", exit_codes: { agent: 1 } } });
    expect((await call("POST", `/v1/runs/${done}/cancel`, { token: admin, body: { reason: "too late" } })).status).toBe(410);

    const lines = structuredLines(log.mock.calls).filter((l) => l.msg === "run.cancel_requested");
    expect(lines.find((l) => l.run === runId)).toMatchObject({ attempt: 0, immediate: true, outcome: "cancelled", reason: "no reason given", state: "cancelled" });
    expect(lines.find((l) => l.run === done)).toMatchObject({ attempt: 1, immediate: false, outcome: "refused", refusal: "task_gone", reason: "too late", seq: null });
  });

  it("a queue message from before messages carried the attempt is logged with the run's attempt all the same", async () => {
    const log = vi.spyOn(console, "log");
    const { admin, orgId } = await createOrgWithSecret();
    const runId = await dispatch(admin);
    await finishRun(admin, runId);
    const ctx = createExecutionContext();
    const batch = createMessageBatch("docket-events", [
      // An event without `attempt`: its data says which attempt it was.
      { id: "old-event", timestamp: new Date(), attempts: 1, body: { run_id: runId, org_id: orgId, seq: 999, type: "run.output", at_ms: 1, data: { run_id: runId, attempt: 1, lines: [] } } },
      // A malformed `attempt` is refused like any malformed field, and retried.
      { id: "bad-event", timestamp: new Date(), attempts: 1, body: { run_id: runId, org_id: orgId, seq: 998, type: "run.output", at_ms: 1, attempt: "x", data: { run_id: runId } } },
      // A callback message without `attempt`: the run says which attempt it ended in.
      { id: "old-callback", timestamp: new Date(), attempts: 1, body: { kind: "callback", run_id: runId, org_id: orgId, seq: null } },
    ]);
    await worker.queue(batch as unknown as MessageBatch<OutboxMessage>, env);
    const result = await getQueueResult(batch, ctx);
    expect([...result.explicitAcks].sort()).toEqual(["old-callback", "old-event"]);
    expect(result.retryMessages.map((m: { msgId: string }) => m.msgId)).toEqual(["bad-event"]);

    const lines = structuredLines(log.mock.calls).filter((l) => l.run === runId);
    expect(lines.find((l) => l.msg === "outbox.consumed" && l.seq === 999)).toMatchObject({ attempt: 1, try: 1, reason: "stored" });
    expect(lines.find((l) => l.msg === "outbox.consume_failed" && l.seq === 998)).toMatchObject({ attempt: 0, try: 1 });
    expect(lines.find((l) => l.msg === "callback.skipped" && l.seq === null)).toMatchObject({ attempt: 1, reason: "no delivery recorded for this run" });
  });
});
