// No run without its alarm: the alarm is armed from the stored run with every commit, every path
// that finds a run finishes what a crash left pending, the cron backstop re-arms a lost alarm, and
// an alarm that fails (D1 unreachable) or fires before the first tick after an outage is armed
// again and reaps nobody on a guess (../shared/DESIGN.md, "Alarms implement lease expiry and
// reaping"; ../shared/spec/dispatch-lifecycle.md, "A shared sweep watermark grants one full
// staleness window after an outage").

import { createScheduledController, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import worker from "../../src/index";
import { loadConfig } from "../../src/config";
import { newId } from "../../src/lib/crypto";
import { labelsKey } from "../../src/run/labels";
import { reaperGraceFromMs } from "../../src/sweep";
import type { RunRecord } from "../../src/run/types";
import { ageRun, call, claim, createOrg, dispatch, getRun, launchedRun, registerRunner, runAlarm, runBody, runStub, untilClaimWaits } from "./helpers";

const MIN = 60_000;
const config = loadConfig(env);

/** The run as its object stores it, and the object's alarm. */
async function stored(runId: string): Promise<{ run: RunRecord; alarm: number | null }> {
  return runInDurableObject(runStub(runId), async (_o, state) => ({
    run: JSON.parse(state.storage.sql.exec<{ doc: string }>("SELECT doc FROM run").one().doc) as RunRecord,
    alarm: await state.storage.getAlarm(),
  }));
}

/** The earliest moment the reaper may act on a held run, with no outage grace. */
function heldDeadline(run: RunRecord): number {
  if (run.state === "claimed") return Math.min(run.leaseExpiresAtMs!, run.launchDeadlineAtMs!);
  return Math.max(run.leaseExpiresAtMs ?? 0, Math.max(run.launchedAtMs ?? 0, run.lastReportAtMs ?? 0) + config.daemonSilenceMs);
}

/** As if the Worker had died right after the object's last commit: its alarm never written. */
async function dropAlarm(runId: string, ...statements: string[]): Promise<void> {
  await runInDurableObject(runStub(runId), async (_o, state) => {
    for (const sql of statements) state.storage.sql.exec(sql);
    await state.storage.deleteAlarm();
  });
}

async function cronTick(atMs: number) {
  await worker.scheduled(createScheduledController({ scheduledTime: atMs, cron: "* * * * *" }), env);
}

/** A D1 binding that is down: every statement throws, as D1 does when it cannot be reached. */
const downD1 = new Proxy({} as D1Database, {
  get: () => () => {
    throw new Error("D1_ERROR: Network connection lost.");
  },
});

/** Runs `fn` while the run object sees D1 down (its own env swapped, in the test only). */
async function withD1Down<T>(runId: string, fn: () => Promise<T>): Promise<T> {
  let real: unknown;
  await runInDurableObject(runStub(runId), (instance) => {
    const o = (instance as unknown as { core: { env: typeof env } }).core;
    real = o.env;
    o.env = new Proxy(o.env, { get: (target, prop) => (prop === "DB" ? downD1 : Reflect.get(target, prop)) });
  });
  try {
    return await fn();
  } finally {
    await runInDurableObject(runStub(runId), (instance) => {
      (instance as unknown as { core: { env: unknown } }).core.env = real;
    });
  }
}

describe("a run never loses its alarm", () => {
  it("a runner that claims while create() is still publishing leaves the claimed run with its alarm", async () => {
    const { orgId, admin } = await createOrg("race");
    const runner = await registerRunner(admin);
    const runId = newId("run");
    const stub = runStub(runId);
    // create()'s first outbox publish (run.created) hangs until the test lets it go.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let reached!: () => void;
    const publishing = new Promise<void>((resolve) => (reached = resolve));
    await runInDurableObject(stub, (instance) => {
      const outbox = (instance as unknown as { core: { outbox: { env: typeof env } } }).core.outbox;
      const queue = env.EVENTS;
      let first = true;
      const slow = {
        sendBatch: async (messages: Parameters<typeof queue.sendBatch>[0]) => {
          if (first) {
            first = false;
            reached();
            await held;
          }
          return queue.sendBatch(messages);
        },
      };
      outbox.env = new Proxy(env, { get: (target, prop) => (prop === "EVENTS" ? slow : Reflect.get(target, prop)) });
    });
    const key = labelsKey("process", []);
    await env.DB.prepare("INSERT OR IGNORE INTO label_sets (org_id, labels_key, created_at_ms) VALUES (?, ?, ?)").bind(orgId, key, Date.now()).run();

    const waiting = claim(runner.token, 5_000);
    await untilClaimWaits(orgId); // the runner's long-poll is waiting when the run arrives
    const created = stub.create({
      id: runId,
      orgId,
      brief: "race",
      repository: null,
      labels: [],
      priority: 0,
      launch: { protocol: "process", command: ["node", "agent.mjs"], image: null, env: {} },
      callbackUrl: null,
      metadata: {},
      createdAtMs: Date.now(),
    });
    await publishing;
    // The run is queued and create() is held in its publish. A loaded machine can let the test's
    // 1 s claim wait (CLAIM_WAIT_MS) run out before the run arrived: then the next claim takes it.
    let granted = await waiting;
    if (granted.status === 204) granted = await claim(runner.token, 0);
    expect(granted.status).toBe(200);
    expect(granted.body.run_id).toBe(runId);
    release();
    await created;

    const { run, alarm } = await stored(runId);
    expect(run.state).toBe("claimed");
    expect(alarm).not.toBeNull();
    expect(alarm!).toBeLessThanOrEqual(heldDeadline(run));
  });

  it("a claim committed but never answered is re-armed by the next claim that finds its stale queue row", async () => {
    const { admin } = await createOrg("lost-claim");
    const first = await registerRunner(admin, { name: "a" });
    const second = await registerRunner(admin, { name: "b" });
    const runId = await dispatch(admin);
    expect((await claim(first.token, 0)).body.run_id).toBe(runId);
    // The Worker died after the claim committed: neither the queue row nor the alarm written.
    await dropAlarm(runId, "UPDATE run SET projected_version = 1");
    await env.DB.prepare("UPDATE runs SET state = 'queued', attempt = 0, version = 1 WHERE id = ?").bind(runId).run();
    expect((await stored(runId)).alarm).toBeNull();

    const again = await claim(second.token, 0);
    expect(again.status).toBe(204);
    const row = await env.DB.prepare("SELECT state, version FROM runs WHERE id = ?").bind(runId).first();
    expect(row).toEqual({ state: "claimed", version: 2 });
    const { run, alarm } = await stored(runId);
    expect(alarm).not.toBeNull();
    expect(alarm!).toBeLessThanOrEqual(heldDeadline(run));

    // And when its lease lapses, that alarm requeues it for another runner.
    await ageRun(runId, config.launchDeadlineMs + 1_000);
    expect(await runAlarm(runId)).toBe(true);
    expect((await getRun(admin, runId)).state).toBe("queued");
  });

  it("the cron backstop re-arms a held run whose alarm was lost", async () => {
    const { runId } = await launchedRun();
    await dropAlarm(runId);
    // Unchanged for longer than the backstop's window.
    await env.DB.prepare("UPDATE runs SET updated_at_ms = updated_at_ms - ? WHERE id = ?").bind(config.alarmBackstopAgeMs + MIN, runId).run();
    expect((await stored(runId)).alarm).toBeNull();

    await cronTick(Date.now());
    const { run, alarm } = await stored(runId);
    expect(alarm).not.toBeNull();
    expect(alarm!).toBeLessThanOrEqual(heldDeadline(run));
  });

  it("a dispatch committed before its queue row and alarm is finished by the retry with the same Idempotency-Key", async () => {
    const { admin } = await createOrg("lost-dispatch");
    const runner = await registerRunner(admin);
    const key = `crash-${crypto.randomUUID()}`;
    const runId = await dispatch(admin, {}, key);
    // The Worker died after the run object committed: no queue row, no alarm, run.created unsent.
    await dropAlarm(runId, "UPDATE run SET projected_version = 0", "UPDATE outbox SET sent_at_ms = NULL");
    await env.DB.prepare("DELETE FROM runs WHERE id = ?").bind(runId).run();
    const listed = async () => (await call("GET", "/v1/runs", { token: admin })).body.runs.map((r: { id: string }) => r.id);
    expect(await listed()).not.toContain(runId);

    const retry = await call("POST", "/v1/runs", { token: admin, body: runBody(), headers: { "Idempotency-Key": key } });
    expect(retry.status).toBe(200);
    expect(retry.body.id).toBe(runId);
    expect(await listed()).toContain(runId);
    const unsent = await runInDurableObject(runStub(runId), (_o, state) =>
      state.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM outbox WHERE sent_at_ms IS NULL").one().n,
    );
    expect(unsent).toBe(0);
    const granted = await claim(runner.token, 0);
    expect(granted.status).toBe(200);
    expect(granted.body.run_id).toBe(runId);
  });

  it("an operator's event redelivery finishes a run whose queue row was never written (docs/runbook.md)", async () => {
    const { admin } = await createOrg("lost-row");
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    await dropAlarm(runId, "UPDATE run SET projected_version = 0");
    await env.DB.prepare("DELETE FROM runs WHERE id = ?").bind(runId).run();

    const redeliver = await call("POST", `/v1/runs/${runId}/events/redeliver`, { token: admin, body: { after: 0 } });
    expect(redeliver.status).toBe(202);
    const listed = (await call("GET", "/v1/runs", { token: admin })).body.runs.map((r: { id: string }) => r.id);
    expect(listed).toContain(runId);
    expect((await claim(runner.token, 0)).body.run_id).toBe(runId);
  });
});

describe("the reaper survives D1 failures and honours the outage grace", () => {
  it("an alarm that cannot read D1 keeps the run's alarm and fails nobody on a guess", async () => {
    const { admin, runId } = await launchedRun();
    await cronTick(Date.now()); // ticks are regular: no outage on record
    await ageRun(runId, config.daemonSilenceMs + MIN); // lease gone, daemon silent

    const before = Date.now();
    expect(await withD1Down(runId, () => runAlarm(runId))).toBe(true);
    const { run, alarm } = await stored(runId);
    expect(run.state).toBe("implementing");
    // D1 down counts as an outage: one full staleness window from now.
    expect(alarm).not.toBeNull();
    expect(alarm!).toBeGreaterThanOrEqual(before + config.daemonSilenceMs);

    // With D1 readable and no outage on record, the same overdue run is reaped.
    expect(await runAlarm(runId)).toBe(true);
    const reaped = await getRun(admin, runId);
    expect(reaped.state).toBe("failed");
    expect(reaped.last_error).toContain("daemon silent");
  });

  it("an exception inside the alarm is logged and the alarm armed again after ALARM_RETRY_MS", async () => {
    const { runId } = await launchedRun();
    const stub = runStub(runId);
    await runInDurableObject(stub, (instance, state) => {
      // Events wait to be published (due now), and publishing throws: retried, but not in a hot loop.
      state.storage.sql.exec("UPDATE outbox SET sent_at_ms = NULL");
      const outbox = (instance as unknown as { core: { outbox: { publish: () => Promise<void> } } }).core.outbox;
      outbox.publish = async () => {
        throw new Error("SQLITE_FULL: database or disk is full");
      };
    });
    const before = Date.now();
    expect(await runAlarm(runId)).toBe(true);
    const { run, alarm } = await stored(runId);
    expect(run.state).toBe("implementing");
    expect(alarm).not.toBeNull();
    expect(alarm!).toBeGreaterThanOrEqual(before + config.alarmRetryMs);
    expect(alarm!).toBeLessThanOrEqual(heldDeadline(run));
  });

  it("alarms that fire before the first tick after an outage fail no healthy run; the window then runs from the recovery", async () => {
    const { admin, runId } = await launchedRun();
    const now = Date.now();
    // The last tick was before the outage; the Worker is back, the cron has not ticked yet.
    await env.DB.prepare("INSERT OR REPLACE INTO sweep (id, last_tick_at_ms, recovered_at_ms) VALUES (1, ?, 0)").bind(now - 20 * MIN).run();
    await ageRun(runId, 15 * MIN); // the lease lapsed and the daemon could not report during the outage

    expect(await runAlarm(runId)).toBe(true);
    const during = await stored(runId);
    expect(during.run.state).toBe("implementing");
    expect(during.alarm).not.toBeNull();
    expect(during.alarm!).toBeGreaterThanOrEqual(now + config.daemonSilenceMs);

    // The first tick records the recovery; a window later, with no report from the daemon, it is reaped.
    await cronTick(Date.now());
    const sweep = await env.DB.prepare("SELECT recovered_at_ms FROM sweep").first<{ recovered_at_ms: number }>();
    expect(sweep!.recovered_at_ms).toBeGreaterThanOrEqual(now);
    expect(await runAlarm(runId)).toBe(true);
    expect((await getRun(admin, runId)).state).toBe("implementing");
    await env.DB.prepare("UPDATE sweep SET recovered_at_ms = recovered_at_ms - ?").bind(config.daemonSilenceMs + MIN).run();
    await ageRun(runId, config.daemonSilenceMs + MIN);
    expect(await runAlarm(runId)).toBe(true);
    const reaped = await getRun(admin, runId);
    expect(reaped.state).toBe("failed");
    expect(reaped.last_error).toContain("daemon silent");
  });
});

describe("where the reaper's staleness window starts (reaperGraceFromMs)", () => {
  const T = 1_000_000_000;
  const threshold = config.sweepOutageThresholdMs;
  it("is the recorded recovery while the cron ticks regularly", () => {
    expect(reaperGraceFromMs({ lastTickAtMs: T - MIN, recoveredAtMs: T - 60 * MIN }, T, threshold)).toBe(T - 60 * MIN);
  });
  it("is now when the last tick is older than the outage threshold, or D1 cannot say", () => {
    expect(reaperGraceFromMs({ lastTickAtMs: T - threshold - 1, recoveredAtMs: 0 }, T, threshold)).toBe(T);
    expect(reaperGraceFromMs("unavailable", T, threshold)).toBe(T);
  });
  it("grants nothing on a deployment whose cron never ticked", () => {
    expect(reaperGraceFromMs(null, T, threshold)).toBe(0);
  });
});
