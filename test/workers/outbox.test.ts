// The transactional outbox: a run's state and its events change together or not at all, and an
// operator can publish a run's events again (../shared/DESIGN.md, "Each run is a Durable Object";
// ../shared/spec/build-lifecycle.md, "Events and completion retry independently").

import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { RunObject } from "../../durable-objects/run-object";
import { DEFAULTS } from "../../src/config";
import { allEvents, finishRun, storedSeqs, waitFor } from "./events-helpers";
import { attemptCall, call, claim, createOrg, dispatch, getRun, registerRunner, report, runAlarm, runStub } from "./helpers";

/** Makes every write of `what` in the run object's SQLite fail until `heal` is called. */
async function breakWrites(runId: string, what: "INSERT ON outbox" | "UPDATE ON run") {
  await runInDurableObject(runStub(runId), (_o, state) => {
    state.storage.sql.exec(`CREATE TRIGGER refuse_writes BEFORE ${what} BEGIN SELECT RAISE(ABORT, 'write refused by the test'); END`);
  });
  return () =>
    runInDurableObject(runStub(runId), (_o, state) => {
      state.storage.sql.exec("DROP TRIGGER refuse_writes");
    });
}

async function queueRow(runId: string) {
  return env.DB.prepare("SELECT state, version FROM runs WHERE id = ?").bind(runId).first<{ state: string; version: number }>();
}

describe("the transactional outbox", () => {
  it("a transition whose event write fails leaves no state change", async () => {
    const { admin } = await createOrg();
    const runId = await dispatch(admin);
    const before = await getRun(admin, runId);
    const eventsBefore = await allEvents(admin, runId);
    expect(eventsBefore.map((e) => e.type)).toEqual(["run.created"]);

    const heal = await breakWrites(runId, "INSERT ON outbox");
    const refused = await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: { reason: "no longer needed" } });
    expect(refused.status).toBe(500);
    await heal();

    const after = await getRun(admin, runId);
    expect(after.state).toBe("queued");
    expect(after.version).toBe(before.version);
    expect(after.stop_request).toBeNull();
    expect(after.ended_at_ms).toBeNull();
    expect(await allEvents(admin, runId)).toEqual(eventsBefore);
    expect(await queueRow(runId)).toEqual({ state: "queued", version: before.version });

    // Once the outbox takes writes again, the same cancel goes through with its event.
    const cancelled = await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: {} });
    expect(cancelled.status).toBe(200);
    const events = await allEvents(admin, runId);
    expect(events.map((e) => [e.seq, e.type])).toEqual([
      [1, "run.created"],
      [2, "run.state"],
    ]);
    expect(events[1].data).toMatchObject({ from: "queued", to: "cancelled" });
    await runAlarm(runId);
  });

  it("a run write that fails leaves no event behind (the reverse)", async () => {
    const { admin } = await createOrg();
    const runId = await dispatch(admin);
    const before = await getRun(admin, runId);
    const eventsBefore = await allEvents(admin, runId);

    const heal = await breakWrites(runId, "UPDATE ON run");
    const refused = await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: {} });
    expect(refused.status).toBe(500);
    await heal();

    expect(await allEvents(admin, runId)).toEqual(eventsBefore);
    const after = await getRun(admin, runId);
    expect(after.state).toBe("queued");
    expect(after.version).toBe(before.version);
    await runAlarm(runId);
  });

  it("a daemon's final report whose events cannot be written keeps the run running, without its artifact", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    const claimed = await claim(runner.token, 0);
    await attemptCall(runner.token, runId, 1, "launched", { sandbox_id: "sbx-1" });
    const before = await getRun(admin, runId);
    const eventsBefore = await allEvents(admin, runId);
    const final = {
      final: { outcome: "completed", exit_codes: { agent: 0 }, artifact: { patch: "diff --git a/x b/x\n", source_revision: "abc1234" }, cost_cents: 40 },
    };

    const heal = await breakWrites(runId, "INSERT ON outbox");
    expect((await report(claimed.body.attempt_token, runId, final)).status).toBe(500);
    await heal();

    const after = await getRun(admin, runId);
    expect(after.state).toBe("implementing");
    expect(after.version).toBe(before.version);
    expect(after.artifact).toBeNull();
    expect(after.cost_cents).toBeNull();
    expect(after.steps[0].outcome).toBeNull();
    expect(await allEvents(admin, runId)).toEqual(eventsBefore);

    // The daemon's retry of the same report lands, with its artifact and events, exactly once.
    expect((await report(claimed.body.attempt_token, runId, final)).status).toBe(200);
    const done = await getRun(admin, runId);
    expect(done.state).toBe("completed");
    expect(done.artifact.patch).toContain("diff --git");
    const types = (await allEvents(admin, runId)).slice(eventsBefore.length).map((e) => e.type);
    expect(types.filter((t) => t === "run.artifact")).toHaveLength(1);
    expect(types.filter((t) => t === "run.state")).toHaveLength(1);
    await runAlarm(runId);
  });
});

describe("publishing the outbox", () => {
  it("a publish that fails never holds up the run: it is retried from the alarm, a bounded number of times, then waits for an operator", async () => {
    const { admin } = await createOrg();
    const runId = await dispatch(admin);
    type OutboxInternals = { env: unknown; status(): { unsent: number; exhausted: number; last_error: string | null } };
    const outboxOf = (o: unknown) => (o as { core: { outbox: OutboxInternals } }).core.outbox;
    // The Queue refuses every message, as during a Queues outage.
    await runInDurableObject(runStub(runId), (instance) => {
      const outbox = outboxOf(instance);
      outbox.env = { ...(outbox.env as object), EVENTS: { sendBatch: async () => Promise.reject(new Error("queue unavailable")) } };
    });

    const cancelled = await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: {} });
    expect(cancelled.status).toBe(200);
    expect((await getRun(admin, runId)).state).toBe("cancelled");
    expect((await allEvents(admin, runId)).map((e) => e.type)).toEqual(["run.created", "run.state"]);

    // Each alarm makes one more attempt once its backoff is due, until the attempts run out.
    for (let i = 0; i < DEFAULTS.outboxMaxAttempts + 2; i++) {
      await runInDurableObject(runStub(runId), (_o, state) => {
        state.storage.sql.exec("UPDATE outbox SET next_attempt_at_ms = 0 WHERE sent_at_ms IS NULL");
      });
      await runAlarm(runId);
    }
    const status = await runInDurableObject(runStub(runId), (instance) => outboxOf(instance).status());
    expect(status).toEqual({ unsent: 1, exhausted: 1, last_error: "Error: queue unavailable" });
    const attempts = await runInDurableObject(runStub(runId), (_o, state) =>
      state.storage.sql.exec<{ attempts: number }>("SELECT attempts FROM outbox WHERE seq = 2").one().attempts,
    );
    expect(attempts).toBe(DEFAULTS.outboxMaxAttempts);
    // Only the event published before the outage reaches the consumer.
    await waitFor("the first event to be stored", async () => ((await storedSeqs(runId)).length === 1 ? true : undefined));
    expect(await storedSeqs(runId)).toEqual([1]);

    // The Queue is back; an operator's redelivery publishes what was left.
    await runInDurableObject(runStub(runId), (instance) => {
      outboxOf(instance).env = env;
    });
    const res = await call("POST", `/v1/runs/${runId}/events/redeliver`, { token: admin, body: { after: 1 } });
    expect(res.body).toMatchObject({ requeued: 1, outbox: { unsent: 0, exhausted: 0 } });
    await waitFor("the event to be stored", async () => ((await storedSeqs(runId)).length === 2 ? true : undefined));
    expect(await storedSeqs(runId)).toEqual([1, 2]);
    await runAlarm(runId);
  });
});

describe("a claim's events", () => {
  type Row = { seq: number; sent: number | null; unconfirmed: number; attempts: number };
  const outboxRows = (runId: string) =>
    runInDurableObject(runStub(runId), (_o, state) =>
      state.storage.sql.exec<Row>("SELECT seq, sent_at_ms AS sent, unconfirmed, attempts FROM outbox ORDER BY seq").toArray(),
    );

  /** A runner, and a run whose dispatch event the consumer has stored. */
  const dispatchedAndStored = async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    await waitFor("the dispatch event to be stored", async () => ((await storedSeqs(runId)).includes(1) ? true : undefined));
    return { runner, runId };
  };

  it("are recorded as sent in the claim's own commit, and marked confirmed by the run's next change", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    const grant = await claim(runner.token, 0);
    expect(grant.status).toBe(200);
    await waitFor("the claim's event to be stored", async () => ((await storedSeqs(runId)).includes(2) ? true : undefined));
    const [, claimed] = await outboxRows(runId);
    expect(claimed).toMatchObject({ seq: 2, unconfirmed: 1, attempts: 1 });
    expect(claimed.sent).not.toBeNull();
    // The next transition's transaction clears the mark of what this instance has since sent.
    expect((await attemptCall(runner.token, runId, 1, "launched", { sandbox_id: "sb-1" })).status).toBe(200);
    const after = await outboxRows(runId);
    expect(after.length).toBeGreaterThan(2);
    expect(after.filter((r) => r.unconfirmed === 1)).toEqual([]);
    await runAlarm(runId);
  });

  it("that a crash kept from D1 are sent again by the run object's next instance", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    expect((await claim(runner.token, 0)).status).toBe(200);
    // The claim's event is stored with its queue row; the dispatch's comes through the Queue.
    await waitFor("the events to be stored", async () => ((await storedSeqs(runId)).length === 2 ? true : undefined));
    // As if the object had gone after its commit and before its D1 write: marked, never stored.
    await env.DB.prepare("DELETE FROM events WHERE run_id = ? AND seq = 2").bind(runId).run();
    expect(await storedSeqs(runId)).toEqual([1]);
    const alarm = await runInDurableObject(runStub(runId), async (_o, state) => {
      const restarted = new RunObject(state, env);
      const armed = await state.storage.getAlarm();
      const rows = state.storage.sql.exec<Row>("SELECT seq, sent_at_ms AS sent, unconfirmed, attempts FROM outbox WHERE seq = 2").one();
      await restarted.alarm();
      return { armed, rows };
    });
    // The new instance made the event unsent again and armed its alarm for it, well before the launch deadline.
    expect(alarm.rows).toMatchObject({ sent: null, unconfirmed: 0 });
    expect(alarm.armed).not.toBeNull();
    expect(alarm.armed!).toBeLessThanOrEqual(Date.now() + DEFAULTS.outboxBackoffMs);
    await waitFor("the claim's event to be stored again", async () => ((await storedSeqs(runId)).includes(2) ? true : undefined));
    expect(await storedSeqs(runId)).toEqual([1, 2]);
    expect((await getRun(admin, runId)).state).toBe("claimed");
    await runAlarm(runId);
  });

  it("are stored with the claim's queue row, without a Queue message", async () => {
    const { runner, runId } = await dispatchedAndStored();
    const sendBatch = vi.fn(async () => Promise.reject(new Error("queue unavailable")));
    await runInDurableObject(runStub(runId), (instance) => {
      const outbox = (instance as unknown as { core: { outbox: { env: unknown } } }).core.outbox;
      outbox.env = { ...(outbox.env as object), EVENTS: { sendBatch } };
    });
    expect((await claim(runner.token, 0)).status).toBe(200);
    // Stored when the claim answers: no Queue send was tried, and the event is marked sent.
    expect(await storedSeqs(runId)).toEqual([1, 2]);
    expect(sendBatch).not.toHaveBeenCalled();
    const [, claimed] = await outboxRows(runId);
    expect(claimed).toMatchObject({ seq: 2, unconfirmed: 1, attempts: 1 });
    expect(claimed.sent).not.toBeNull();
    await runInDurableObject(runStub(runId), (instance) => {
      (instance as unknown as { core: { outbox: { env: unknown } } }).core.outbox.env = env;
    });
    await runAlarm(runId);
  });

  it("whose D1 write fails are unsent again and retried from the alarm through the Queue, not at the launch deadline", async () => {
    const { runner, runId } = await dispatchedAndStored();
    await env.DB.prepare(`CREATE TRIGGER refuse_events BEFORE INSERT ON events WHEN NEW.run_id = '${runId}' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`).run();
    try {
      expect((await claim(runner.token, 0)).status).toBe(200);
    } finally {
      await env.DB.prepare("DROP TRIGGER refuse_events").run();
    }
    const [, claimed] = await outboxRows(runId);
    expect(claimed).toMatchObject({ seq: 2, sent: null, unconfirmed: 0, attempts: 1 });
    const armed = await runInDurableObject(runStub(runId), (_o, state) => state.storage.getAlarm());
    expect(armed).not.toBeNull();
    expect(armed!).toBeLessThan(Date.now() + DEFAULTS.launchDeadlineMs / 2);
    await runInDurableObject(runStub(runId), (_o, state) => {
      state.storage.sql.exec("UPDATE outbox SET next_attempt_at_ms = 0 WHERE sent_at_ms IS NULL");
    });
    await runAlarm(runId);
    await waitFor("the claim's event to be stored", async () => ((await storedSeqs(runId)).includes(2) ? true : undefined));
    expect((await outboxRows(runId)).map((r) => r.sent !== null)).toEqual([true, true]);
    // The queue row that failed with it was written again too.
    expect(await env.DB.prepare("SELECT state FROM runs WHERE id = ?").bind(runId).first("state")).toBe("claimed");
    await runAlarm(runId);
  });
});

describe("operator redelivery of events", () => {
  it("after the run is terminal, an admin republishes its events and the consumer stores each once", async () => {
    const { admin } = await createOrg();
    const runId = await dispatch(admin);
    await finishRun(admin, runId);
    const events = await allEvents(admin, runId);
    const all = events.map((e) => e.seq);
    expect(all).toEqual(all.map((_, i) => i + 1));
    // The Queue delivers them to the consumer, which stores them in D1.
    await waitFor("the events to be stored", async () => ((await storedSeqs(runId)).length === all.length ? true : undefined));

    // As if the stored copies were lost: the run object still has its outbox.
    await env.DB.prepare("DELETE FROM events WHERE run_id = ?").bind(runId).run();
    const res = await call("POST", `/v1/runs/${runId}/events/redeliver`, { token: admin, body: { after: 0 } });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ run_id: runId, after: 0, requeued: all.length, outbox: { unsent: 0, exhausted: 0 } });
    await waitFor("the events to be stored again", async () => ((await storedSeqs(runId)).length === all.length ? true : undefined));
    expect(await storedSeqs(runId)).toEqual(all);

    // Redelivering the tail again is harmless: each (run, seq) is stored once.
    const tail = await call("POST", `/v1/runs/${runId}/events/redeliver`, { token: admin, body: { after: all.length - 2 } });
    expect(tail.body.requeued).toBe(2);
    const stored = await env.DB.prepare("SELECT seq, type, data FROM events WHERE run_id = ? ORDER BY seq").bind(runId).all<{ seq: number; type: string; data: string }>();
    expect(stored.results.map((r) => r.seq)).toEqual(all);
    expect(stored.results.map((r) => r.type)).toEqual(events.map((e) => e.type));
    expect(stored.results.map((r) => JSON.parse(r.data))).toEqual(events.map((e) => e.data));
    // The run itself is untouched.
    expect((await getRun(admin, runId)).state).toBe("completed");
    await runAlarm(runId);
  });

  it("redelivery is an admin's call, within the admin's own organization", async () => {
    const { admin } = await createOrg();
    const other = await createOrg("other");
    const runId = await dispatch(admin);
    const member = await call("POST", "/v1/tokens", { token: admin, body: { kind: "member", role: "member" } });
    expect((await call("POST", `/v1/runs/${runId}/events/redeliver`, { token: member.body.token, body: {} })).status).toBe(403);
    const foreign = await call("POST", `/v1/runs/${runId}/events/redeliver`, { token: other.admin, body: {} });
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.code).toBe("not_found");
    const bad = await call("POST", `/v1/runs/${runId}/events/redeliver`, { token: admin, body: { after: -1 } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.field).toBe("after");
    await runAlarm(runId);
  });
});
