// Cancel, exactly as ../shared/spec/dispatch-lifecycle.md decides.

import { describe, expect, it } from "vitest";
import { ageRun, attemptCall, call, claim, createOrg, dispatch, getRun, registerRunner, report, runAlarm, runStub } from "./helpers";

describe("cancel", () => {
  it("an unclaimed queued run becomes cancelled at once (200) and leaves the queue", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    const res = await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: { reason: "not needed" } });
    expect(res.status).toBe(200);
    expect(res.body.state).toBe("cancelled");
    expect((await claim(runner.token, 0)).status).toBe(204);
    const queued = await call("GET", "/v1/runs?state=queued", { token: admin });
    expect(queued.body.runs).toHaveLength(0);
  });

  it("any member of the organization may cancel, not only an admin", async () => {
    const { admin } = await createOrg();
    const member = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "member" } })).body.token;
    const runId = await dispatch(admin);
    const res = await call("POST", `/v1/runs/${runId}/cancel`, { token: member, body: {} });
    expect(res.status).toBe(200);
  });

  it("a claimed run gets a durable stop request (202), honored at the next lease refresh, and ends cancelled", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    const c = (await claim(runner.token, 0)).body;
    await attemptCall(runner.token, runId, 1, "launched", { sandbox_id: "sbx" });
    const res = await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: { reason: "stop" } });
    expect(res.status).toBe(202);
    expect(res.body.state).toBe("implementing");
    expect(res.body.stop_request.reason).toBe("stop");
    const lease = await attemptCall(runner.token, runId, 1, "lease");
    expect(lease.body.stop_requested).toBe(true);
    // The daemon's final report races the stop: the stop wins.
    await report(c.attempt_token, runId, { final: { outcome: "failed", error: "killed" } });
    const run = await getRun(admin, runId);
    expect(run.state).toBe("cancelled");
  });

  it("the runner's stopped call after a stop request ends the run cancelled", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    await claim(runner.token, 0);
    await attemptCall(runner.token, runId, 1, "launched", { sandbox_id: "sbx" });
    await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: {} });
    const stopped = await attemptCall(runner.token, runId, 1, "stopped", { sandbox_id: "sbx" });
    expect(stopped.body.state).toBe("cancelled");
  });

  it("the stop request survives lease loss before launch: the reaper ends the run cancelled, never requeued", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    await claim(runner.token, 0);
    await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: {} });
    await ageRun(runId, 5 * 60_000);
    await runAlarm(runId);
    const run = await getRun(admin, runId);
    expect(run.state).toBe("cancelled");
    expect(run.attempt).toBe(1);
  });

  it("cancelling twice is harmless; cancelling a completed run is 410 task_gone", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const a = await dispatch(admin);
    expect((await call("POST", `/v1/runs/${a}/cancel`, { token: admin, body: {} })).status).toBe(200);
    expect((await call("POST", `/v1/runs/${a}/cancel`, { token: admin, body: {} })).status).toBe(200);
    const b = await dispatch(admin);
    const c = (await claim(runner.token, 0)).body;
    await report(c.attempt_token, b, { final: { outcome: "completed", artifact: { patch: "" } } });
    const res = await call("POST", `/v1/runs/${b}/cancel`, { token: admin, body: {} });
    expect(res.status).toBe(410);
    expect(res.body.error.code).toBe("task_gone");
    expect((await getRun(admin, b)).state).toBe("completed");
  });

  it("a paused or blocked run is cancelled at once", async () => {
    const { admin } = await createOrg();
    const runId = await dispatch(admin);
    const org = (await getRun(admin, runId)).org_id;
    await runStub(runId).control(org, { type: "block", blocker: { summary: "which database?", evidence: [], questions: [], humanAction: "answer the question" } });
    const res = await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: {} });
    expect(res.status).toBe(200);
    expect(res.body.state).toBe("cancelled");
  });
});
