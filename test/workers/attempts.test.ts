// Reports and calls bind to the attempt (../shared/spec/dispatch-lifecycle.md, "Reports and tokens
// bind to the attempt count"): an older attempt never changes the current one.

import { describe, expect, it } from "vitest";
import { ageRun, attemptCall, claim, createOrg, dispatch, getRun, registerRunner, report, runAlarm } from "./helpers";

async function secondAttempt() {
  const { admin } = await createOrg();
  const runner = await registerRunner(admin);
  const runId = await dispatch(admin);
  const first = await claim(runner.token, 0);
  await attemptCall(runner.token, runId, 1, "launch-failed", { error: "image pull failed" });
  await ageRun(runId, 60_000); // past the backoff
  const second = await claim(runner.token, 0);
  expect(second.body.attempt).toBe(2);
  await attemptCall(runner.token, runId, 2, "launched", { sandbox_id: "sbx-2" });
  return { admin, runner, runId, first: first.body, second: second.body };
}

describe("attempt binding", () => {
  it("a report with the previous attempt's token is 409 stale_attempt and changes nothing", async () => {
    const { admin, runId, first } = await secondAttempt();
    const before = await getRun(admin, runId);
    const res = await report(first.attempt_token, runId, {
      phase: "verifying",
      final: { outcome: "failed", error: "old attempt says failed" },
    });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe("stale_attempt");
    expect(res.body.error.current_attempt).toBe(2);
    const after = await getRun(admin, runId);
    expect(after).toEqual(before);
  });

  it("a lease, launched or stopped call for attempt N-1 is stale_attempt and does not clobber the current sandbox", async () => {
    const { admin, runner, runId } = await secondAttempt();
    for (const [what, body] of [
      ["lease", {}],
      ["launched", { sandbox_id: "sbx-old" }],
      ["stopped", {}],
      ["launch-failed", { error: "late" }],
    ] as const) {
      const res = await attemptCall(runner.token, runId, 1, what, body);
      expect(res.status, what).toBe(409);
      expect(res.body.error.code).toBe("stale_attempt");
    }
    const run = await getRun(admin, runId);
    expect(run).toMatchObject({ state: "implementing", attempt: 2, sandbox_id: "sbx-2" });
  });

  it("a replayed final report changes nothing: the run stays as the first report left it", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    const c = (await claim(runner.token, 0)).body;
    await attemptCall(runner.token, runId, 1, "launched", { sandbox_id: "s" });
    const final = { final: { outcome: "completed", artifact: { patch: "diff" }, cost_cents: 10 } };
    expect((await report(c.attempt_token, runId, final)).status).toBe(200);
    const done = await getRun(admin, runId);
    const replay = await report(c.attempt_token, runId, { final: { outcome: "failed", error: "replayed differently" } });
    expect(replay.status).toBe(410);
    expect(replay.body.error.code).toBe("task_gone");
    expect(await getRun(admin, runId)).toEqual(done);
  });

  it("another machine's call for the attempt is 409 other_machine", async () => {
    const { admin } = await createOrg();
    const a = await registerRunner(admin, { name: "a" });
    const b = await registerRunner(admin, { name: "b" });
    const runId = await dispatch(admin);
    await claim(a.token, 0);
    const res = await attemptCall(b.token, runId, 1, "lease");
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe("other_machine");
    expect((await getRun(admin, runId)).machine_id).not.toBeNull();
  });

  it("calls about a finished run are 410 task_gone", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    const c = (await claim(runner.token, 0)).body;
    await attemptCall(runner.token, runId, 1, "launched", { sandbox_id: "s" });
    await report(c.attempt_token, runId, { final: { outcome: "failed", error: "tests failed" } });
    const res = await attemptCall(runner.token, runId, 1, "lease");
    expect(res.status).toBe(410);
    expect(res.body.error.code).toBe("task_gone");
  });

  it("a lease call after the claim was taken back is 409 lease_expired", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    await claim(runner.token, 0);
    await ageRun(runId, 10 * 60_000);
    await runAlarm(runId);
    expect((await getRun(admin, runId)).state).toBe("queued");
    const res = await attemptCall(runner.token, runId, 1, "lease");
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe("lease_expired");
  });

  it("the lease answer extends the lease and says whether a stop was requested", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    const c = (await claim(runner.token, 0)).body;
    await ageRun(runId, 30_000);
    const res = await attemptCall(runner.token, runId, 1, "lease");
    expect(res.status).toBe(200);
    expect(res.body.stop_requested).toBe(false);
    expect(res.body.lease_expires_at_ms).toBeGreaterThan(c.lease_expires_at_ms - 30_000);
  });

  it("a daemon report that arrives before the launched call proves the launch", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    const c = (await claim(runner.token, 0)).body;
    const res = await report(c.attempt_token, runId, { phase: "planning", lines: ["starting"] });
    expect(res.status).toBe(200);
    const run = await getRun(admin, runId);
    expect(run.state).toBe("implementing");
    expect(run.phase).toBe("planning");
    // The runner's launched call, arriving late, records the sandbox without another transition.
    const late = await attemptCall(runner.token, runId, 1, "launched", { sandbox_id: "s" });
    expect(late.status).toBe(200);
    expect(late.body.state).toBe("implementing");
    expect((await getRun(admin, runId)).sandbox_id).toBe("s");
    // A second launched call naming another sandbox is refused.
    const other = await attemptCall(runner.token, runId, 1, "launched", { sandbox_id: "t" });
    expect(other.body.error.code).toBe("invalid_transition");
    expect((await getRun(admin, runId)).sandbox_id).toBe("s");
  });
});
