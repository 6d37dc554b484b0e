// The reaper runs on each run object's alarm (../shared/spec/dispatch-lifecycle.md, "Decisions").

import { createScheduledController } from "cloudflare:test";
import { env } from "cloudflare:workers";
import worker from "../../src/index";
import { describe, expect, it } from "vitest";
import { ageRun, call, createOrg, dispatch, getRun, launchedRun, report, runAlarm } from "./helpers";

const MIN = 60_000;

async function cronTick(atMs: number) {
  await worker.scheduled(createScheduledController({ scheduledTime: atMs, cron: "* * * * *" }), env);
}

describe("the reaper", () => {
  it("fails a launched run whose lease is gone and whose daemon has been silent for ten minutes", async () => {
    const { admin, runId } = await launchedRun();
    await ageRun(runId, 11 * MIN);
    await runAlarm(runId);
    const run = await getRun(admin, runId);
    expect(run.state).toBe("failed");
    expect(run.last_error).toContain("daemon silent");
  });

  it("keeps a launched run whose lease is gone while its daemon still reports", async () => {
    const { admin, runId, attemptToken } = await launchedRun();
    await ageRun(runId, 9 * MIN);
    await report(attemptToken, runId, { lines: ["still working"] });
    await ageRun(runId, 5 * MIN);
    await runAlarm(runId);
    expect((await getRun(admin, runId)).state).toBe("implementing");
  });

  it("never reaps a queued run: it waits visibly, however long", async () => {
    const { admin } = await createOrg();
    const runId = await dispatch(admin);
    await ageRun(runId, 30 * 24 * 60 * MIN);
    await runAlarm(runId);
    expect((await getRun(admin, runId)).state).toBe("queued");
  });

  it("delivers a cancel no runner can: with the lease gone and a stop pending, the run ends cancelled", async () => {
    const { admin, runId, attemptToken } = await launchedRun();
    const cancel = await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: {} });
    expect(cancel.status).toBe(202);
    // The daemon keeps reporting, but no runner refreshes the lease to carry the stop.
    await ageRun(runId, 2 * MIN);
    await report(attemptToken, runId, { lines: ["working"] });
    await runAlarm(runId);
    const run = await getRun(admin, runId);
    expect(run.state).toBe("cancelled");
    expect(run.stop_request).not.toBeNull();
  });

  it("after an outage, every run gets one full staleness window before it is reaped (the sweep watermark)", async () => {
    const { admin, runId } = await launchedRun();
    const now = Date.now();
    await cronTick(now - 20 * MIN); // the last tick before the API went away
    await ageRun(runId, 15 * MIN); // the daemon was silent through the outage, the lease long gone
    await cronTick(now); // the API is back: a 20-minute gap is an outage
    const sweep = await env.DB.prepare("SELECT recovered_at_ms FROM sweep").first<{ recovered_at_ms: number }>();
    expect(sweep?.recovered_at_ms).toBe(now);
    await runAlarm(runId);
    expect((await getRun(admin, runId)).state).toBe("implementing");

    // Time passes past one full window after the recovery, the cron ticking every minute as it
    // does (its last tick stays recent): now the run is reaped.
    await env.DB.prepare("UPDATE sweep SET recovered_at_ms = recovered_at_ms - ?").bind(11 * MIN).run();
    await ageRun(runId, 11 * MIN);
    await runAlarm(runId);
    expect((await getRun(admin, runId)).state).toBe("failed");
  });

  it("regular cron ticks are not an outage and grant no grace", async () => {
    const now = Date.now();
    await cronTick(now - 2 * MIN);
    await cronTick(now - MIN);
    await cronTick(now);
    const sweep = await env.DB.prepare("SELECT recovered_at_ms, last_tick_at_ms FROM sweep").first<{ recovered_at_ms: number; last_tick_at_ms: number }>();
    expect(sweep?.last_tick_at_ms).toBe(now);
    expect(sweep?.recovered_at_ms).not.toBe(now);
  });
});
