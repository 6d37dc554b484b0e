// Bounded storage: idempotency keys expire after IDEMPOTENCY_KEY_TTL_MS, and the stored events of
// runs that ended more than EVENT_RETENTION_MS ago are pruned (src/retention.ts,
// durable-objects/outbox.ts), each by bounded batches; a read inside the retention is unchanged.

import { createScheduledController, runInDurableObject } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config";
import worker from "../../src/index";
import { pruneStorage } from "../../src/retention";
import type { RunRecord } from "../../src/run/types";
import { dispatchBuild, readyToBuild } from "./builds-helpers";
import { page, signIn } from "./dashboard-helpers";
import { allEvents, finishRun, storedSeqs, waitFor } from "./events-helpers";
import { call, createOrg, editStoredRun, runAlarm, runBody, runStub } from "./helpers";

const config = loadConfig(env);
const DAY_MS = 86_400_000;

async function tick(atMs: number): Promise<void> {
  await worker.scheduled(createScheduledController({ scheduledTime: atMs, cron: "* * * * *" }), env);
}

function dispatchWithKey(admin: string, key: string, overrides = {}) {
  return call("POST", "/v1/runs", { token: admin, body: runBody(overrides), headers: { "Idempotency-Key": key } });
}

/** Makes a stored key look `ms` older, as if it had been used that long ago. */
async function ageKey(key: string, ms: number): Promise<void> {
  await env.DB.prepare("UPDATE idempotency_keys SET created_at_ms = created_at_ms - ? WHERE key = ?").bind(ms, key).run();
}

async function keyCount(prefix: string): Promise<number> {
  const row = await env.DB.prepare("SELECT COUNT(*) AS n FROM idempotency_keys WHERE key LIKE ?").bind(`${prefix}%`).first<{ n: number }>();
  return row!.n;
}

describe("Idempotency-Key window", () => {
  it("the default window is 24 hours", () => {
    expect(config.idempotencyKeyTtlMs).toBe(DAY_MS);
  });

  it("a replay just inside the window answers the first run (200)", async () => {
    const { admin } = await createOrg();
    const first = await dispatchWithKey(admin, "inside-window");
    expect(first.status).toBe(201);
    await ageKey("inside-window", config.idempotencyKeyTtlMs - 60_000);
    const again = await dispatchWithKey(admin, "inside-window");
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(first.body.id);
    // A different payload inside the window is still a conflict.
    const other = await dispatchWithKey(admin, "inside-window", { brief: "something else" });
    expect(other.status).toBe(409);
    expect(other.body.error.code).toBe("idempotency_conflict");
  });

  it("after the window the same key creates a new run (201), which later replays", async () => {
    const { admin } = await createOrg();
    const first = await dispatchWithKey(admin, "past-window");
    await ageKey("past-window", config.idempotencyKeyTtlMs + 1);
    const fresh = await dispatchWithKey(admin, "past-window", { brief: "a new payload is fine too" });
    expect(fresh.status).toBe(201);
    expect(fresh.body.id).not.toBe(first.body.id);
    const replay = await dispatchWithKey(admin, "past-window", { brief: "a new payload is fine too" });
    expect(replay.status).toBe(200);
    expect(replay.body.id).toBe(fresh.body.id);
  });

  it("the cron tick deletes expired keys in bounded batches and keeps the live ones", async () => {
    const { admin } = await createOrg();
    for (let i = 0; i < 5; i++) await dispatchWithKey(admin, `prune-old-${i}`);
    await dispatchWithKey(admin, "prune-live");
    for (let i = 0; i < 5; i++) await ageKey(`prune-old-${i}`, config.idempotencyKeyTtlMs + 1);
    const now = Date.now();
    const first = await pruneStorage(env, { ...config, pruneBatchMax: 3 }, now);
    expect(first?.idempotency_keys).toBe(3);
    expect(await keyCount("prune-old-")).toBe(2);
    await tick(now);
    expect(await keyCount("prune-old-")).toBe(0);
    expect(await keyCount("prune-live")).toBe(1);
    expect((await dispatchWithKey(admin, "prune-live")).status).toBe(200);
  });
});

/** Moves the run's end `ms` into the past, as if it had ended that long ago; answers the new end. */
async function ageEnd(runId: string, ms: number): Promise<number> {
  return editStoredRun(runId, (run) => {
    run.endedAtMs = run.endedAtMs! - ms;
    return run.endedAtMs;
  });
}

async function endedRun(admin: string): Promise<{ runId: string; lastSeq: number }> {
  const created = await call("POST", "/v1/runs", { token: admin, body: runBody() });
  const runId = created.body.id as string;
  await finishRun(admin, runId);
  const events = await allEvents(admin, runId);
  return { runId, lastSeq: events[events.length - 1].seq };
}

describe("Idempotency-Key window and build jobs", () => {
  it("a build job whose dispatch is unconfirmed keeps its key past the window: reconciliation finds its one run", async () => {
    const { admin, orgId, requestId } = await readyToBuild();
    const dispatched = await dispatchBuild(admin, requestId, "job-kept");
    expect(dispatched.status).toBe(201);
    const runId = dispatched.body.run_id as string;
    // The run exists but its confirmation was lost (the window build-lifecycle.md recovers from).
    await env.DB.prepare("UPDATE build_jobs SET status = 'dispatch_unconfirmed', run_id = NULL WHERE org_id = ? AND id = ?").bind(orgId, "job-kept").run();
    await ageKey("job-kept", config.idempotencyKeyTtlMs + 1);
    await pruneStorage(env, config, Date.now());
    expect(await keyCount("job-kept")).toBe(1);
    const reconciled = await call("POST", "/v1/build-jobs/job-kept/reconcile", { token: admin, body: {} });
    expect(reconciled.body).toMatchObject({ outcome: "dispatched" });
    expect(reconciled.body.job.run_id).toBe(runId);
    const runs = await call("GET", "/v1/runs", { token: admin });
    expect(runs.body.runs.map((r: { id: string }) => r.id)).toEqual([runId]);
  });
});

describe("event retention in the run object", () => {
  it("an ended run's alarm is armed at its end plus EVENT_RETENTION_MS", async () => {
    const { admin } = await createOrg();
    const { runId } = await endedRun(admin);
    const { endedAtMs, alarm } = await runInDurableObject(runStub(runId), async (_o, state) => {
      const run = JSON.parse(state.storage.sql.exec<{ doc: string }>("SELECT doc FROM run").one().doc) as RunRecord;
      return { endedAtMs: run.endedAtMs!, alarm: await state.storage.getAlarm() };
    });
    expect(alarm).toBe(endedAtMs + config.eventRetentionMs);
  });

  it("inside the retention period the alarm prunes nothing: every page and a stream from 0 still read", async () => {
    const { admin } = await createOrg();
    const { runId, lastSeq } = await endedRun(admin);
    await ageEnd(runId, config.eventRetentionMs - 60_000);
    await runAlarm(runId);
    const page = await call("GET", `/v1/runs/${runId}/events`, { token: admin });
    expect(page.status).toBe(200);
    expect(page.body.events.map((e: { seq: number }) => e.seq)).toEqual(Array.from({ length: lastSeq }, (_, i) => i + 1));
    const stream = await exports.default.fetch(
      new Request(`http://docket.test/v1/runs/${runId}/events/stream`, { headers: { Authorization: `Bearer ${admin}`, "Last-Event-ID": "0" } }),
    );
    expect(stream.status).toBe(200);
    const text = await stream.text(); // the run has ended: every event, then `end`
    expect(text).toContain("id: 1\n");
    expect(text).toContain("event: end");
  });

  it("after the retention period sent events are pruned but the last; a read from before them is 410 events_pruned", async () => {
    const { admin } = await createOrg();
    const { runId, lastSeq } = await endedRun(admin);
    expect(lastSeq).toBeGreaterThan(2);
    await ageEnd(runId, config.eventRetentionMs + 1);
    await runAlarm(runId);
    const old = await call("GET", `/v1/runs/${runId}/events`, { token: admin });
    expect(old.status).toBe(410);
    expect(old.body.error).toMatchObject({ code: "events_pruned", pruned_through_seq: lastSeq - 1 });
    const tail = await call("GET", `/v1/runs/${runId}/events?cursor=${lastSeq - 1}`, { token: admin });
    expect(tail.status).toBe(200);
    expect(tail.body.events.map((e: { seq: number }) => e.seq)).toEqual([lastSeq]);
    expect(tail.body.terminal).toBe(true);
    const stream = await call("GET", `/v1/runs/${runId}/events/stream?after=1`, { token: admin });
    expect(stream.status).toBe(410);
    expect(stream.body.error).toMatchObject({ code: "events_pruned", pruned_through_seq: lastSeq - 1 });
    // Fully pruned: nothing is left to prune, so the alarm is not armed for it again.
    const alarm = await runInDurableObject(runStub(runId), (_o, state) => state.storage.getAlarm());
    expect(alarm).toBeNull();
  });

  it("after the retention period a newest-first page ends at the last event kept, the run still tells every change of state, and its page says the rest were deleted", async () => {
    const { admin } = await createOrg();
    const { runId, lastSeq } = await endedRun(admin);
    await ageEnd(runId, config.eventRetentionMs + 1);
    await runAlarm(runId);
    const newest = await call("GET", `/v1/runs/${runId}/events?order=newest`, { token: admin });
    expect(newest.status).toBe(200);
    expect(newest.body.events.map((e: { seq: number }) => e.seq)).toEqual([lastSeq]);
    expect(newest.body.next_cursor).toBeNull();
    const before = await call("GET", `/v1/runs/${runId}/events?order=newest&cursor=${lastSeq}`, { token: admin });
    expect(before.status).toBe(410);
    expect(before.body.error).toMatchObject({ code: "events_pruned", pruned_through_seq: lastSeq - 1 });
    const run = (await call("GET", `/v1/runs/${runId}`, { token: admin })).body;
    expect(run.state_history.at(-1)).toMatchObject({ to: run.state });
    expect(run.state_history[0]).toMatchObject({ from: "queued", to: "claimed" });
    const html = (await page(`/dash/runs/${runId}`, { cookie: await signIn(admin) })).text;
    expect(html).toContain(`Events before #${lastSeq} were deleted after the retention period.`);
    expect(html).toContain(`<strong>${run.state}</strong>`);
  });

  it("a run that has not ended keeps all its events however old they are", async () => {
    const { admin } = await createOrg();
    const created = await call("POST", "/v1/runs", { token: admin, body: runBody() });
    const runId = created.body.id as string;
    await runInDurableObject(runStub(runId), (_o, state) => {
      state.storage.sql.exec("UPDATE outbox SET at_ms = at_ms - ?", config.eventRetentionMs * 2);
    });
    await runAlarm(runId);
    expect((await call("GET", `/v1/runs/${runId}/events`, { token: admin })).status).toBe(200);
  });
});

describe("event retention in D1", () => {
  it("the cron tick deletes the stored events of runs ended past the retention, in bounded batches", async () => {
    const { admin } = await createOrg();
    const { runId: oldRun, lastSeq } = await endedRun(admin);
    const { runId: recentRun, lastSeq: recentLast } = await endedRun(admin);
    await waitFor("stored events", async () => ((await storedSeqs(oldRun)).length === lastSeq ? true : undefined));
    await waitFor("stored events", async () => ((await storedSeqs(recentRun)).length === recentLast ? true : undefined));
    await env.DB.prepare("UPDATE ended_runs SET ended_at_ms = ended_at_ms - ? WHERE run_id = ?").bind(config.eventRetentionMs + 1, oldRun).run();
    const first = await pruneStorage(env, { ...config, pruneBatchMax: 2 }, Date.now());
    expect(first).toMatchObject({ events: 2, ended_runs: 0 });
    expect(await storedSeqs(oldRun)).toHaveLength(lastSeq - 2);
    for (let i = 0; i < 10 && (await storedSeqs(oldRun)).length > 0; i++) await tick(Date.now());
    expect(await storedSeqs(oldRun)).toEqual([]);
    const left = await env.DB.prepare("SELECT run_id FROM ended_runs WHERE run_id IN (?, ?)").bind(oldRun, recentRun).all<{ run_id: string }>();
    expect(left.results.map((r) => r.run_id)).toEqual([recentRun]);
    expect(await storedSeqs(recentRun)).toHaveLength(recentLast);
  });

  it("a run object whose retention alarm was never armed is pruned by the cron tick's backstop", async () => {
    const { admin } = await createOrg();
    const { runId, lastSeq } = await endedRun(admin);
    await waitFor("stored events", async () => ((await storedSeqs(runId)).length === lastSeq ? true : undefined));
    // As if the run had ended before retention existed: long ago, and no alarm armed for it.
    await ageEnd(runId, config.eventRetentionMs + 1);
    await runInDurableObject(runStub(runId), (_o, state) => state.storage.deleteAlarm());
    await env.DB.prepare("UPDATE ended_runs SET ended_at_ms = ended_at_ms - ? WHERE run_id = ?").bind(config.eventRetentionMs + 1, runId).run();
    await tick(Date.now());
    expect(await storedSeqs(runId)).toEqual([]);
    const old = await call("GET", `/v1/runs/${runId}/events`, { token: admin });
    expect(old.status).toBe(410);
    expect(old.body.error).toMatchObject({ code: "events_pruned", pruned_through_seq: lastSeq - 1 });
    const left = await env.DB.prepare("SELECT COUNT(*) AS n FROM ended_runs WHERE run_id = ?").bind(runId).first<{ n: number }>();
    expect(left!.n).toBe(0);
  });
});
