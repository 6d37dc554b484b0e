// Launch failures requeue with backoff up to a budget of three attempts, then the run fails with
// the last error (../shared/spec/dispatch-lifecycle.md).

import { describe, expect, it } from "vitest";
import { ageRun, attemptCall, call, claim, createOrg, dispatch, getRun, registerRunner, runAlarm } from "./helpers";

describe("launch failures", () => {
  it("three launch failures, each requeued with a growing backoff, end the run failed with the last error", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    const backoffs: number[] = [];
    for (let attempt = 1; attempt <= 3; attempt++) {
      const c = await claim(runner.token, 0);
      expect(c.body.attempt).toBe(attempt);
      const res = await attemptCall(runner.token, runId, attempt, "launch-failed", { error: `pull failed #${attempt}` });
      expect(res.status).toBe(200);
      if (attempt < 3) {
        expect(res.body.state).toBe("queued");
        const run = await getRun(admin, runId);
        backoffs.push(run.not_before_ms - run.updated_at_ms);
        // During the backoff nobody gets it.
        expect((await claim(runner.token, 0)).status).toBe(204);
        await ageRun(runId, 60_000);
      } else {
        expect(res.body.state).toBe("failed");
      }
    }
    // Test config: base 1000 ms, so [500, 1000] then [1000, 2000].
    expect(backoffs[0]).toBeGreaterThanOrEqual(500);
    expect(backoffs[0]).toBeLessThanOrEqual(1000);
    expect(backoffs[1]).toBeGreaterThanOrEqual(1000);
    expect(backoffs[1]).toBeLessThanOrEqual(2000);
    const run = await getRun(admin, runId);
    expect(run.state).toBe("failed");
    expect(run.last_error).toContain("pull failed #3");
    expect(run.steps.map((s: { outcome: string }) => s.outcome)).toEqual(["requeued", "requeued", "failed"]);
    expect((await claim(runner.token, 0)).status).toBe(204);
  });

  it("a requeued run becomes claimable when its backoff ends, and a waiting runner is woken", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    await claim(runner.token, 0);
    await attemptCall(runner.token, runId, 1, "launch-failed", { error: "boom" });
    // A late call of the failed attempt is told why it is over.
    const late = await attemptCall(runner.token, runId, 1, "lease");
    expect(late.status).toBe(409);
    expect(late.body.error).toMatchObject({ code: "lease_expired", message: "attempt 1 is over and the run was requeued: launch failed: boom" });
    const waiting = claim(runner.token, 10_000);
    await ageRun(runId, 60_000);
    await runAlarm(runId); // the alarm at not-before tells the scheduler
    const got = await waiting;
    expect(got.status).toBe(200);
    expect(got.body.attempt).toBe(2);
  });

  it("a cancel pending during a launch failure ends the run cancelled, not requeued", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    await claim(runner.token, 0);
    const cancel = await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: { reason: "wrong branch" } });
    expect(cancel.status).toBe(202);
    const res = await attemptCall(runner.token, runId, 1, "launch-failed", { error: "pull failed" });
    expect(res.body.state).toBe("cancelled");
    const run = await getRun(admin, runId);
    expect(run.state).toBe("cancelled");
    expect(run.attempt).toBe(1);
    expect((await claim(runner.token, 0)).status).toBe(204);
  });

  it("a cancel pending when the attempt budget is spent ends cancelled, not failed", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    for (let attempt = 1; attempt <= 2; attempt++) {
      await claim(runner.token, 0);
      await attemptCall(runner.token, runId, attempt, "launch-failed", { error: "x" });
      await ageRun(runId, 60_000);
    }
    await claim(runner.token, 0);
    await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: {} });
    const res = await attemptCall(runner.token, runId, 3, "launch-failed", { error: "x" });
    expect(res.body.state).toBe("cancelled");
  });

  it("a claim not launched within the launch deadline is requeued, and fails once the budget is spent", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    for (let attempt = 1; attempt <= 3; attempt++) {
      const c = await claim(runner.token, 0);
      expect(c.body.attempt).toBe(attempt);
      // Keep the lease fresh so only the launch deadline (120 s) can be what lapses.
      await ageRun(runId, 50_000);
      await attemptCall(runner.token, runId, attempt, "lease");
      await ageRun(runId, 50_000);
      await attemptCall(runner.token, runId, attempt, "lease");
      await ageRun(runId, 50_000);
      await runAlarm(runId);
      const run = await getRun(admin, runId);
      expect(run.state).toBe(attempt < 3 ? "queued" : "failed");
      expect(run.last_error).toContain("launch deadline");
      if (attempt < 3) await ageRun(runId, 60_000);
    }
  });

  it("a claim whose lease lapses before launch is requeued by the reaper", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    await claim(runner.token, 0);
    await ageRun(runId, 61_000);
    await runAlarm(runId);
    const run = await getRun(admin, runId);
    expect(run.state).toBe("queued");
    expect(run.last_error).toContain("lease lapsed");
  });
});
