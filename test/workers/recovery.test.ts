// Recovery after an outage or a deploy (../shared/spec/run-lifecycle.md, "Completion and recovery";
// docs/protocol.md, "Recovery"): unfinished runs are reconciled before anything is dispatched, the
// observation is persisted on each run, and the hold on dispatch is bounded.

import { createScheduledController, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { RunObject } from "../../durable-objects/run-object";
import worker from "../../src/index";
import { loadConfig } from "../../src/config";
import { recoveryPass, type PassResult } from "../../src/recovery";
import { tickSweep } from "../../src/sweep";
import { allEvents } from "./events-helpers";
import { attemptCall, call, claim, createOrg, dispatch, getRun, launchedRun, registerRunner, runStub, sleep } from "./helpers";

const MIN = 60_000;
const config = loadConfig(env);

async function cronTick(atMs = Date.now()) {
  await worker.scheduled(createScheduledController({ scheduledTime: atMs, cron: "* * * * *" }), env);
}

/**
 * The sweep row as an outage leaves it: the last tick long ago, no recovery under way. A scheduler
 * that read the row just before reads it again after CLAIM_SWEEP_TTL_MS (an outage that really
 * happens takes minutes, and the row a scheduler keeps holds its claims once it is that old).
 */
async function outageOf(ms: number) {
  const at = Date.now() - ms;
  await env.DB.prepare("INSERT OR REPLACE INTO sweep (id, last_tick_at_ms, recovered_at_ms, recovery_done_at_ms, recovery_cursor, version_id) VALUES (1, ?, 0, 0, NULL, NULL)")
    .bind(at)
    .run();
  await sleep(config.claimSweepTtlMs);
}

async function sweepRow() {
  return env.DB.prepare("SELECT * FROM sweep WHERE id = 1").first<Record<string, number | string | null>>();
}

/** An org, a runner and a run that runner has claimed and launched, then a second run still queued. */
async function workInFlight() {
  const { admin, runner, runId: running, attemptToken } = await launchedRun();
  const waiting = await dispatch(admin);
  return { admin, runner, running, waiting, attemptToken };
}

/** A run paused at a stored checkpoint (pause, the daemon's checkpoint, the runner's stop). */
async function pausedAtCheckpoint(admin: string, runner: { token: string }) {
  const runId = await dispatch(admin);
  const grant = (await claim(runner.token, 0)).body;
  expect(grant.run_id).toBe(runId);
  await attemptCall(runner.token, runId, 1, "launched", { sandbox_id: "sbx-p" });
  await call("POST", `/v1/runs/${runId}/pause`, { token: admin, body: { reason: "deploy window" } });
  const patch = "diff --git a/a.txt b/a.txt\nnew file mode 100644\n--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+work\n";
  const stored = await call("POST", `/v1/runs/${runId}/attempts/1/checkpoint`, {
    token: grant.attempt_token,
    body: { session_id: "sess", last_phase: "implementing", pending_actions: [], session: { turns: 1 }, patch, source_revision: "a".repeat(40) },
  });
  expect(stored.status).toBe(200);
  await attemptCall(runner.token, runId, 1, "stopped", { reason: "checkpointed" });
  expect((await getRun(admin, runId)).state).toBe("paused");
  return runId;
}

beforeEach(async () => {
  await env.DB.prepare("DELETE FROM sweep").run();
});

describe("recovery before dispatch", () => {
  it("after an outage a claim is refused with 503 recovering until the unfinished runs are reconciled; then dispatch goes on", async () => {
    const { admin, runner, running, waiting } = await workInFlight();
    await outageOf(10 * MIN);
    // Why it waits, as the run and the queue say it.
    const queued = await getRun(admin, waiting);
    expect(queued.state).toBe("queued");
    expect(queued.waiting).toMatchObject({ reason: "recovery" });
    const queue = await call("GET", "/v1/queue", { token: admin });
    expect(queue.body.runs.find((r: { id: string }) => r.id === waiting)?.waiting.reason).toBe("recovery");

    const held = await claim(runner.token, 0);
    expect(held.status).toBe(503);
    expect(held.body.error).toMatchObject({ code: "recovering", retry_after_ms: config.recoveryRetryAfterMs });
    expect(held.body.error.message).toContain("reconciled before anything is dispatched");
    expect(held.headers.get("retry-after")).toBe(String(config.recoveryRetryAfterMs / 1_000));
    await cronTick();
    const row = await sweepRow();
    expect(row!.recovered_at_ms).toBeGreaterThan(0);
    expect(row!.recovery_done_at_ms).toBe(row!.recovered_at_ms);

    // The running attempt was observed against its runner, and the observation is on the run.
    const recovered = (await allEvents(admin, running)).filter((e) => e.type === "run.recovered");
    expect(recovered).toHaveLength(1);
    expect(recovered[0].data).toMatchObject({ recovery_at_ms: row!.recovered_at_ms, state: "implementing", problem: null, attempt: 1 });
    expect(recovered[0].data.observed).toContain("awaiting its runner's next report");
    // The queued run was not a recovery's business, and is dispatched now.
    expect((await allEvents(admin, waiting)).some((e) => e.type === "run.recovered")).toBe(false);
    expect((await getRun(admin, waiting)).waiting.reason).not.toBe("recovery");
    const granted = await claim(runner.token, 0);
    expect(granted.status).toBe(200);
    expect(granted.body.run_id).toBe(waiting);
  });

  it("a held claim moves the recovery on itself, without waiting for the cron", async () => {
    const { admin, runner, running, waiting } = await workInFlight();
    await outageOf(10 * MIN);
    expect((await claim(runner.token, 0)).status).toBe(503);
    let answer = await claim(runner.token, 0);
    for (let i = 0; i < 50 && answer.status === 503; i++) {
      await new Promise((r) => setTimeout(r, 100));
      answer = await claim(runner.token, 0);
    }
    expect(answer.status).toBe(200);
    expect(answer.body.run_id).toBe(waiting);
    expect((await allEvents(admin, running)).filter((e) => e.type === "run.recovered")).toHaveLength(1);
  });

  it("each run is observed once per recovery; a second tick of the same recovery adds nothing", async () => {
    const { admin, running } = await workInFlight();
    await outageOf(10 * MIN);
    await cronTick();
    await cronTick(Date.now() + 1_000);
    expect((await allEvents(admin, running)).filter((e) => e.type === "run.recovered")).toHaveLength(1);
    // A later outage is a new recovery: observed again.
    await outageOf(10 * MIN);
    await cronTick();
    expect((await allEvents(admin, running)).filter((e) => e.type === "run.recovered")).toHaveLength(2);
  });

  it("a paused run continues only from a verified checkpoint: incomplete stored work becomes its recovery problem and resume is refused", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const whole = await pausedAtCheckpoint(admin, runner);
    const broken = await pausedAtCheckpoint(admin, runner);
    // The stored work of one checkpoint is lost (a torn write the outage left behind).
    await runInDurableObject(runStub(broken), async (_obj: RunObject, state) => {
      state.storage.sql.exec("DELETE FROM checkpoint_chunks WHERE part = 'patch'");
    });
    await outageOf(10 * MIN);
    await cronTick();

    const ok = (await allEvents(admin, whole)).find((e) => e.type === "run.recovered");
    expect(ok?.data).toMatchObject({ state: "paused", problem: null });
    expect(ok?.data.observed).toContain("verified against its stored work");
    expect((await getRun(admin, whole)).checkpoint).not.toBeNull();

    const bad = (await allEvents(admin, broken)).find((e) => e.type === "run.recovered");
    expect(bad?.data.problem).toContain("incomplete");
    const run = await getRun(admin, broken);
    expect(run).toMatchObject({ state: "paused", checkpoint: null });
    expect(run.recovery_problem).toContain("incomplete");
    const resume = await call("POST", `/v1/runs/${broken}/resume`, { token: admin, body: {} });
    expect(resume.status).toBe(409);
    expect(resume.body.error).toMatchObject({ code: "checkpoint_missing", recovery_problem: run.recovery_problem });
    expect((await call("POST", `/v1/runs/${whole}/resume`, { token: admin, body: {} })).status).toBe(200);
  });

  it("the hold on dispatch is bounded by RECOVERY_HOLD_MAX_MS", async () => {
    const { runner, waiting } = await workInFlight();
    const now = Date.now();
    // A recovery whose pass never finished, started longer ago than the bound: dispatch goes on.
    await env.DB.prepare("INSERT OR REPLACE INTO sweep (id, last_tick_at_ms, recovered_at_ms, recovery_done_at_ms) VALUES (1, ?, ?, 0)")
      .bind(now, now - config.recoveryHoldMaxMs - 1_000)
      .run();
    const answer = await claim(runner.token, 0);
    expect(answer.status).toBe(200);
    expect(answer.body.run_id).toBe(waiting);
  });

  it("a plane whose cron never ticked has nothing to recover and dispatches at once", async () => {
    const { runner, waiting } = await workInFlight();
    expect(await sweepRow()).toBeNull();
    expect((await claim(runner.token, 0)).body.run_id).toBe(waiting);
  });

  it("a tick of a new Worker version starts a recovery; the same version's next tick does not", async () => {
    const t0 = Date.now();
    await tickSweep(env.DB, config, t0, "version-a");
    expect((await tickSweep(env.DB, config, t0 + MIN, "version-a")).recoveredAtMs).toBe(0);
    expect((await tickSweep(env.DB, config, t0 + 2 * MIN, "version-b")).recoveredAtMs).toBe(t0 + 2 * MIN);
    expect(await sweepRow()).toMatchObject({ version_id: "version-b", recovery_done_at_ms: 0, recovery_cursor: null });
    // Without a version binding the stored version stays, and no recovery starts.
    expect((await tickSweep(env.DB, config, t0 + 3 * MIN, null)).recoveredAtMs).toBe(t0 + 2 * MIN);
  });
});

describe("a run whose reconciliation keeps failing", () => {
  it("is passed over after RECOVERY_RUN_TRIES_MAX failed tries: the runs after it are reconciled, claims are not held past the pass, and its problem is on the run", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const paused: string[] = [];
    for (let i = 0; i < 3; i++) paused.push(await pausedAtCheckpoint(admin, runner));
    // The first run the pass reaches (id order) is the one that fails.
    const [stuck, ...after] = paused.sort();
    const waiting = await dispatch(admin);
    // Its stored checkpoint can no longer be read: every reconciliation of it throws.
    await runInDurableObject(runStub(stuck), async (_obj: RunObject, state) => {
      state.storage.sql.exec("DROP TABLE checkpoint_chunks");
    });
    await outageOf(10 * MIN);
    const { recoveredAtMs } = await tickSweep(env.DB, config, Date.now());
    // Held by the recovery (asked without a claim, whose own kick would move the pass on meanwhile).
    expect((await getRun(admin, waiting)).waiting).toMatchObject({ reason: "recovery" });

    // One run per step, as a pass over more runs than RECOVERY_BATCH goes (the earlier tests left theirs too).
    const steps: PassResult[] = [];
    for (let i = 0; i < 100 && !steps.at(-1)?.done; i++) steps.push(await recoveryPass(env, { ...config, recoveryBatch: 1 }));
    expect(steps.at(-1)!.done).toBe(true);
    expect(steps.filter((s) => s.failed > 0)).toHaveLength(config.recoveryRunTriesMax - 1);
    expect(steps.filter((s) => s.abandoned > 0)).toHaveLength(1);
    expect(await sweepRow()).toMatchObject({ recovered_at_ms: recoveredAtMs, recovery_done_at_ms: recoveredAtMs });

    for (const id of after) {
      const recovered = (await allEvents(admin, id)).filter((e) => e.type === "run.recovered");
      expect(recovered.map((e) => e.data)).toMatchObject([{ recovery_at_ms: recoveredAtMs, state: "paused", problem: null }]);
    }
    // The problem is on the run, through the API; its checkpoint was not read, so it is not dropped.
    const run = await getRun(admin, stuck);
    expect(run).toMatchObject({ state: "paused", recovery_failure: { recovery_at_ms: recoveredAtMs, tries: config.recoveryRunTriesMax } });
    expect(run.recovery_failure.error).toContain("checkpoint_chunks");
    expect(run.checkpoint).not.toBeNull();
    const event = (await allEvents(admin, stuck)).find((e) => e.type === "run.recovered");
    expect(event?.data).toMatchObject({ recovery_at_ms: recoveredAtMs, problem: run.recovery_failure.error });
    expect(event?.data.observed).toContain(`after ${config.recoveryRunTriesMax} failed tries`);

    const granted = await claim(runner.token, 0);
    expect(granted.status).toBe(200);
    expect(granted.body.run_id).toBe(waiting);
  });

  it("a later recovery that reconciles the run clears its recovery_failure", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await pausedAtCheckpoint(admin, runner);
    await runStub(runId).recoveryFailed(Date.now() - MIN, config.recoveryRunTriesMax, "Error: the object did not answer");
    expect((await getRun(admin, runId)).recovery_failure).toMatchObject({ tries: config.recoveryRunTriesMax, error: "Error: the object did not answer" });
    await outageOf(10 * MIN);
    await cronTick();
    const run = await getRun(admin, runId);
    expect(run.recovery_failure).toBeNull();
    expect(run.checkpoint).not.toBeNull();
  });
});
