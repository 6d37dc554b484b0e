// The live event stream: server-sent events served by the run object, pushed as they are written,
// resumable from any sequence number with no gap and no duplicate, ended when the run is terminal
// (../shared/spec/dispatch-lifecycle.md, "Agent session events"; docs/protocol.md, "Live events").

import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { DEFAULTS } from "../../src/config";
import type { RunObject } from "../../durable-objects/run-object";
import type { RunStreams } from "../../durable-objects/run-streams";
import { allEvents, finishRun, openStream, seqsOf, type Frame } from "./events-helpers";
import { attemptCall, call, claim, createOrg, dispatch, registerRunner, report, runAlarm, runStub } from "./helpers";

const lastSeq = async (token: string, runId: string) => (await allEvents(token, runId)).at(-1)!.seq as number;

/** The events a stream delivered, in the shape GET /v1/runs/:id/events answers. */
const eventsOf = (frames: Frame[]) => frames.filter((f) => f.event === "message").map((f) => JSON.parse(f.data));

/** The run object's live streams, for the bounds that need time to pass. */
const streamsOf = (runId: string) =>
  runInDurableObject(runStub(runId), (instance: RunObject) => (instance as unknown as { streams: RunStreams }).streams);

describe("the live event stream", () => {
  it("pushes every event as it is written, in order, and ends when the run is terminal", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    const stream = await openStream(admin, runId);
    expect(stream.status).toBe(200);
    expect(stream.headers.get("Content-Type")).toContain("text/event-stream");
    const sse = stream.sse!;
    const frames: Frame[] = [];
    frames.push(...(await sse.until(1)));

    // Each step of the run shows up on the open stream without a new request.
    const claimed = await claim(runner.token, 0);
    frames.push(...(await sse.until(await lastSeq(admin, runId))));
    await attemptCall(runner.token, runId, 1, "launched", { sandbox_id: "sbx-1" });
    frames.push(...(await sse.until(await lastSeq(admin, runId))));
    await report(claimed.body.attempt_token, runId, { phase: "implementing", lines: ["step one", "step two"] });
    frames.push(...(await sse.until(await lastSeq(admin, runId))));
    await report(claimed.body.attempt_token, runId, {
      final: { outcome: "completed", exit_codes: { agent: 0 }, artifact: { patch: "diff --git a/x b/x\n" }, cost_cents: 3 },
    });
    frames.push(...(await sse.rest()));

    const events = await allEvents(admin, runId);
    expect(eventsOf(frames)).toEqual(events);
    expect(seqsOf(frames)).toEqual(events.map((_, i) => i + 1));
    const end = frames.at(-1)!;
    expect(end.event).toBe("end");
    expect(JSON.parse(end.data)).toEqual({ state: "completed", last_seq: events.length });
    expect(await sse.next()).toBeNull();
    await runAlarm(runId);
  });

  it("a stream resumed from N shows exactly the events after N, then ends", async () => {
    const { admin } = await createOrg();
    const runId = await dispatch(admin);
    await finishRun(admin, runId);
    const events = await allEvents(admin, runId);
    const total = events.length;
    expect(total).toBeGreaterThan(4);

    for (const n of [0, 1, 3, total - 1]) {
      const stream = await openStream(admin, runId, { after: n });
      expect(stream.status).toBe(200);
      const frames = await stream.sse!.rest();
      expect(eventsOf(frames)).toEqual(events.slice(n));
      expect(frames.at(-1)!.event).toBe("end");
    }

    // An EventSource reconnects to the same URL with Last-Event-ID: the header wins over ?after=.
    const resumed = await openStream(admin, runId, { after: 1, lastEventId: "4" });
    expect(seqsOf(await resumed.sse!.rest())).toEqual(events.slice(4).map((e) => e.seq));

    // Nothing after N on a terminal run: 204, which tells an EventSource to stop reconnecting.
    expect((await openStream(admin, runId, { after: total })).status).toBe(204);
    expect((await openStream(admin, runId, { lastEventId: String(total + 10) })).status).toBe(204);
    await runAlarm(runId);
  });

  it("a client that drops mid-run and reconnects with Last-Event-ID misses nothing and sees nothing twice", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    const claimed = await claim(runner.token, 0);
    await attemptCall(runner.token, runId, 1, "launched", { sandbox_id: "sbx-1" });

    const first = await openStream(admin, runId);
    const seen = await first.sse!.until(2);
    await first.sse!.cancel();
    const lastSeen = seqsOf(seen).at(-1)!;

    // The run moves on while the client is away.
    await report(claimed.body.attempt_token, runId, { lines: ["while away"] });
    await report(claimed.body.attempt_token, runId, { final: { outcome: "failed", error: "tests failed", exit_codes: { agent: 1 } } });

    const second = await openStream(admin, runId, { lastEventId: String(lastSeen) });
    const rest = await second.sse!.rest();
    const events = await allEvents(admin, runId);
    expect([...seqsOf(seen), ...seqsOf(rest)]).toEqual(events.map((e) => e.seq));
    expect(JSON.parse(rest.at(-1)!.data).state).toBe("failed");
    await runAlarm(runId);
  });

  it("is bounded: a run serves at most STREAMS_PER_RUN_MAX streams, each for at most STREAM_MAX_DURATION_MS", async () => {
    const { admin } = await createOrg();
    const runId = await dispatch(admin);
    const open = [];
    for (let i = 0; i < DEFAULTS.streamsPerRunMax; i++) {
      const stream = await openStream(admin, runId);
      expect(stream.status).toBe(200);
      expect(seqsOf(await stream.sse!.until(1))).toEqual([1]);
      open.push(stream);
    }
    const refused = await openStream(admin, runId);
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe("too_many_streams");
    expect(refused.headers.get("Retry-After")).toBe(String(DEFAULTS.streamRetryMs / 1000));

    // Past the maximum duration every stream closes without `end`: clients reconnect and resume.
    const streams = await streamsOf(runId);
    expect(streams.openCount).toBe(DEFAULTS.streamsPerRunMax);
    await runInDurableObject(runStub(runId), (instance: RunObject) => {
      (instance as unknown as { streams: RunStreams }).streams.tick(Date.now() + DEFAULTS.streamMaxDurationMs);
    });
    for (const stream of open) {
      const frames = await stream.sse!.rest();
      expect(frames.map((f) => f.event)).not.toContain("end");
    }
    expect((await streamsOf(runId)).openCount).toBe(0);
    const again = await openStream(admin, runId, { lastEventId: "1" });
    expect(again.status).toBe(200);
    await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: {} });
    const frames = await again.sse!.rest();
    expect(seqsOf(frames)).toEqual([2]);
    expect(frames.at(-1)!.event).toBe("end");
    await runAlarm(runId);
  });

  it("is for members of the run's organization, and a malformed resume point is refused", async () => {
    const { admin } = await createOrg();
    const other = await createOrg("other");
    const runId = await dispatch(admin);
    expect((await openStream(null, runId)).status).toBe(401);
    const foreign = await openStream(other.admin, runId);
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.code).toBe("not_found");
    const badHeader = await openStream(admin, runId, { lastEventId: "seven" });
    expect(badHeader.status).toBe(400);
    expect(badHeader.body.error.field).toBe("Last-Event-ID");
    const badQuery = await openStream(admin, runId, { after: "-1" });
    expect(badQuery.status).toBe(400);
    expect(badQuery.body.error.field).toBe("after");
    await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: {} });
    await runAlarm(runId);
  });
});
