// Stop at checkpoint and Resume paused run (../shared/spec/run-lifecycle.md, "Pause and
// continuation"; docs/protocol.md, "Pause and resume"), through the public API as an operator, a
// runner and its daemon see it.

import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { RunObject } from "../../durable-objects/run-object";
import { ageRun, attemptCall, call, claim, createOrg, dispatch, getRun, launchedRun, registerRunner, report, runAlarm, runStub } from "./helpers";

const PATCH = "diff --git a/notes.txt b/notes.txt\nnew file mode 100644\n--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1 @@\n+first attempt\n";

function checkpointBody(overrides: Record<string, unknown> = {}) {
  return {
    session_id: "sess-1",
    last_phase: "implementing",
    pending_actions: ["run the tests"],
    session: { turns: 3, memory: ["wrote notes.txt"] },
    patch: PATCH,
    source_revision: "a".repeat(40),
    ...overrides,
  };
}

function postCheckpoint(attemptToken: string, runId: string, attempt: number, body: unknown = checkpointBody()) {
  return call("POST", `/v1/runs/${runId}/attempts/${attempt}/checkpoint`, { token: attemptToken, body });
}

/** A run paused through a stored checkpoint, with the operator's hold. */
async function pausedWithCheckpoint() {
  const ctx = await launchedRun();
  await call("POST", `/v1/runs/${ctx.runId}/pause`, { token: ctx.admin, body: { reason: "lunch" } });
  const stored = await postCheckpoint(ctx.attemptToken, ctx.runId, 1);
  expect(stored.status).toBe(200);
  return ctx;
}

describe("Stop at checkpoint (POST /v1/runs/:id/pause)", () => {
  it("pauses a queued run at once, with the hold and the reason; no runner can claim it", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const member = (await call("POST", "/v1/tokens", { token: admin, body: { kind: "member" } })).body.token;
    const runId = await dispatch(admin);
    const res = await call("POST", `/v1/runs/${runId}/pause`, { token: member, body: { reason: "wait for the release" } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ state: "paused", hold: true, pause_reason: "wait for the release", checkpoint: null, recovery_problem: null });
    expect((await claim(runner.token, 0)).status).toBe(204);
  });

  it("makes an implementing run pausing and tells its runner through the lease answer", async () => {
    const { admin, runner, runId } = await launchedRun();
    const before = await attemptCall(runner.token, runId, 1, "lease");
    expect(before.body.pause_requested).toBe(false);
    const res = await call("POST", `/v1/runs/${runId}/pause`, { token: admin, body: {} });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ state: "pausing", hold: true, continuation: "implementing" });
    const lease = await attemptCall(runner.token, runId, 1, "lease");
    expect(lease.status).toBe(200);
    expect(lease.body).toMatchObject({ state: "pausing", pause_requested: true, stop_requested: false });
  });

  it("refuses a run that cannot pause with 409 invalid_transition naming its state, and changes nothing", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    await claim(runner.token, 0);
    const res = await call("POST", `/v1/runs/${runId}/pause`, { token: admin, body: {} });
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ code: "invalid_transition", state: "claimed" });
    expect(res.body.error.message).toContain("claimed");
    expect((await getRun(admin, runId)).hold).toBe(false);
  });

  it("is the member's alone: another organization's token gets not_found", async () => {
    const { admin } = await createOrg("one");
    const other = await createOrg("two");
    const runId = await dispatch(admin);
    const res = await call("POST", `/v1/runs/${runId}/pause`, { token: other.admin, body: {} });
    expect(res.status).toBe(404);
    expect((await getRun(admin, runId)).state).toBe("queued");
  });
});

describe("the checkpoint (POST /v1/runs/:id/attempts/:n/checkpoint)", () => {
  it("moves a pausing run to paused, keeps the continuation and shows the checkpoint's description", async () => {
    const { admin, runId } = await pausedWithCheckpoint();
    const run = await getRun(admin, runId);
    expect(run).toMatchObject({ state: "paused", hold: true, continuation: "implementing", machine_id: null, lease_expires_at_ms: null, recovery_problem: null });
    expect(run.checkpoint).toMatchObject({
      attempt: 1,
      session_id: "sess-1",
      last_phase: "implementing",
      pending_actions: ["run the tests"],
      source_revision: "a".repeat(40),
      patch_chars: PATCH.length,
      session_chars: JSON.stringify({ turns: 3, memory: ["wrote notes.txt"] }).length,
    });
    expect(run.steps[0].outcome).toBe("paused");
  });

  it("sent again after a lost answer answers the same success and changes nothing", async () => {
    const { admin, runId, attemptToken } = await pausedWithCheckpoint();
    const before = await getRun(admin, runId);
    const again = await postCheckpoint(attemptToken, runId, 1, checkpointBody({ session_id: "sess-other" }));
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ run_id: runId, attempt: 1, state: "paused" });
    expect(await getRun(admin, runId)).toEqual(before);
  });

  it("is refused while the run is not pausing: an implementing run is never paused by a checkpoint alone", async () => {
    const { admin, runId, attemptToken } = await launchedRun();
    const res = await postCheckpoint(attemptToken, runId, 1);
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ code: "invalid_transition", state: "implementing" });
    expect((await getRun(admin, runId)).checkpoint).toBeNull();
  });

  it("refuses another attempt's token, a missing token and a body over its bounds, changing nothing", async () => {
    const { admin, runId, attemptToken } = await launchedRun();
    await call("POST", `/v1/runs/${runId}/pause`, { token: admin, body: {} });
    const wrongAttempt = await postCheckpoint(attemptToken, runId, 2);
    expect(wrongAttempt.status).toBe(401);
    const noToken = await call("POST", `/v1/runs/${runId}/attempts/1/checkpoint`, { body: checkpointBody() });
    expect(noToken.status).toBe(401);
    const badBody = await postCheckpoint(attemptToken, runId, 1, { ...checkpointBody(), pending_actions: "all" });
    expect(badBody.status).toBe(400);
    expect((await getRun(admin, runId)).state).toBe("pausing");
  });

  it("refuses a stale attempt's token once the run moved on to a newer attempt", async () => {
    const { admin, runner, runId, attemptToken } = await pausedWithCheckpoint();
    await call("POST", `/v1/runs/${runId}/resume`, { token: admin, body: {} });
    await claim(runner.token, 0);
    await attemptCall(runner.token, runId, 2, "launched", { sandbox_id: "sbx-2" });
    await call("POST", `/v1/runs/${runId}/pause`, { token: admin, body: {} });
    const stale = await postCheckpoint(attemptToken, runId, 1, checkpointBody({ session_id: "old" }));
    expect(stale.status).toBe(409);
    expect(stale.body.error).toMatchObject({ code: "stale_attempt", current_attempt: 2 });
    const run = await getRun(admin, runId);
    expect(run.state).toBe("pausing");
    expect(run.checkpoint.attempt).toBe(1);
  });

  it("a pausing run whose sandbox stops without a checkpoint fails; it is never paused without one", async () => {
    const { admin, runner, runId } = await launchedRun();
    await call("POST", `/v1/runs/${runId}/pause`, { token: admin, body: {} });
    const stopped = await attemptCall(runner.token, runId, 1, "stopped", { reason: "the daemon died" });
    expect(stopped.body.state).toBe("failed");
    const run = await getRun(admin, runId);
    expect(run.state).toBe("failed");
    expect(run.last_error).toContain("without a checkpoint");
  });

  it("a pausing run whose daemon went silent and whose lease is gone is failed by the reaper, not paused", async () => {
    const { admin, runId } = await launchedRun();
    await call("POST", `/v1/runs/${runId}/pause`, { token: admin, body: {} });
    await ageRun(runId, 60 * 60 * 1000);
    await runAlarm(runId);
    const run = await getRun(admin, runId);
    expect(run.state).toBe("failed");
    expect(run.checkpoint).toBeNull();
  });

  it("refuses a session over CHECKPOINT_SESSION_MAX_CHARS with 400 naming the field", async () => {
    const { admin, runId, attemptToken } = await launchedRun();
    await call("POST", `/v1/runs/${runId}/pause`, { token: admin, body: {} });
    const res = await postCheckpoint(attemptToken, runId, 1, checkpointBody({ session: "x".repeat(1_000_000) }));
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: "invalid_request", field: "session" });
    expect((await getRun(admin, runId)).state).toBe("pausing");
  });

  it("a pausing run with a pending cancel ends cancelled once the checkpoint is stored", async () => {
    const { admin, runId, attemptToken } = await launchedRun();
    await call("POST", `/v1/runs/${runId}/pause`, { token: admin, body: {} });
    await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: {} });
    const res = await postCheckpoint(attemptToken, runId, 1);
    expect(res.body.state).toBe("cancelled");
  });
});

describe("Resume paused run (POST /v1/runs/:id/resume)", () => {
  it("clears the hold and queues the continuation; the claim grant carries the checkpoint whole", async () => {
    const { admin, runner, runId } = await pausedWithCheckpoint();
    const res = await call("POST", `/v1/runs/${runId}/resume`, { token: admin, body: {} });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ state: "queued", hold: false, continuation: "implementing", recovery_problem: null });
    const grant = await claim(runner.token, 0);
    expect(grant.status).toBe(200);
    expect(grant.body.attempt).toBe(2);
    expect(grant.body.checkpoint).toMatchObject({
      attempt: 1,
      session_id: "sess-1",
      last_phase: "implementing",
      pending_actions: ["run the tests"],
      patch: PATCH,
      source_revision: "a".repeat(40),
    });
    expect(JSON.parse(grant.body.checkpoint.session)).toEqual({ turns: 3, memory: ["wrote notes.txt"] });
  });

  it("new work's claim grant carries no checkpoint", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    await dispatch(admin);
    const grant = await claim(runner.token, 0);
    expect(grant.body.checkpoint).toBeNull();
  });

  it("a run paused before any claim has nothing to restore: it resumes as new work", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    await call("POST", `/v1/runs/${runId}/pause`, { token: admin, body: {} });
    const res = await call("POST", `/v1/runs/${runId}/resume`, { token: admin, body: {} });
    expect(res.status).toBe(200);
    expect(res.body.state).toBe("queued");
    expect((await claim(runner.token, 0)).body.checkpoint).toBeNull();
  });

  it("refuses a run that is not paused with 409 invalid_transition naming its state", async () => {
    const { admin, runId } = await launchedRun();
    const res = await call("POST", `/v1/runs/${runId}/resume`, { token: admin, body: {} });
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ code: "invalid_transition", state: "implementing" });
  });

  it("a run that executed without a checkpoint is a recovery problem: 409 checkpoint_missing, never a silent restart", async () => {
    const { admin, runner, runId } = await launchedRun();
    await call("POST", `/v1/runs/${runId}/pause`, { token: admin, body: {} });
    // Quiescence seen without a checkpoint (no daemon left to upload one).
    const org = (await getRun(admin, runId)).org_id;
    await runStub(runId).control(org, { type: "quiesced" });
    const paused = await getRun(admin, runId);
    expect(paused.state).toBe("paused");
    expect(paused.recovery_problem).toContain("without a checkpoint");
    const res = await call("POST", `/v1/runs/${runId}/resume`, { token: admin, body: {} });
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ code: "checkpoint_missing", state: "paused" });
    expect(res.body.error.recovery_problem).toContain("without a checkpoint");
    const after = await getRun(admin, runId);
    expect(after).toMatchObject({ state: "paused", hold: true });
    expect((await claim(runner.token, 0)).status).toBe(204);
  });
});

describe("the operator hold", () => {
  it("a scheduler resume never clears it; only the operator's resume does", async () => {
    const { admin, runId } = await pausedWithCheckpoint();
    const org = (await getRun(admin, runId)).org_id;
    const bySchduler = await runStub(runId).control(org, { type: "resume", by: "scheduler" });
    expect(bySchduler).toMatchObject({ error: { code: "invalid_transition", hold: true } });
    expect(await getRun(admin, runId)).toMatchObject({ state: "paused", hold: true });
    const byOperator = await call("POST", `/v1/runs/${runId}/resume`, { token: admin, body: {} });
    expect(byOperator.body).toMatchObject({ state: "queued", hold: false });
  });

  it("a scheduler pause without a hold can be resumed by the scheduler", async () => {
    const { admin, runId } = await launchedRun();
    const org = (await getRun(admin, runId)).org_id;
    await runStub(runId).control(org, { type: "pause", hold: false, reason: "scheduler disabled" });
    expect(await getRun(admin, runId)).toMatchObject({ state: "pausing", hold: false, pause_reason: "scheduler disabled" });
    await runStub(runId).control(org, { type: "quiesced" });
    // Executed without a checkpoint: even the scheduler cannot restart it silently.
    expect(await runStub(runId).control(org, { type: "resume", by: "scheduler" })).toMatchObject({ error: { code: "checkpoint_missing" } });
  });

  it("a human's authorization of a run that blocked while stopping keeps the hold: it waits paused, and Resume paused run queues it", async () => {
    const { admin, runner, runId, attemptToken } = await launchedRun();
    await call("POST", `/v1/runs/${runId}/pause`, { token: admin, body: { reason: "lunch" } });
    const blocker = { summary: "which database?", evidence: ["two configs"], questions: ["postgres or sqlite?"], human_action: "answer on the issue" };
    expect((await report(attemptToken, runId, { final: { outcome: "blocked", exit_codes: { agent: 0 }, blocker } })).status).toBe(200);
    const org = (await getRun(admin, runId)).org_id;
    await runStub(runId).control(org, { type: "authorize" });
    expect(await getRun(admin, runId)).toMatchObject({ state: "paused", hold: true, pause_reason: "lunch", blocker: null });
    expect((await claim(runner.token, 0)).status).toBe(204);
    // The blocked attempt left nothing to restore: the human's authorization is what lets it go on.
    const resumed = await call("POST", `/v1/runs/${runId}/resume`, { token: admin, body: {} });
    expect(resumed.body).toMatchObject({ state: "queued", hold: false });
    const grant = await claim(runner.token, 0);
    expect(grant.status).toBe(200);
    expect(grant.body).toMatchObject({ run_id: runId, attempt: 2 });
  });

  it("an operator's stop of a run the scheduler paused adds the hold", async () => {
    const { admin, runId } = await launchedRun();
    const org = (await getRun(admin, runId)).org_id;
    await runStub(runId).control(org, { type: "pause", hold: false, reason: "scheduler disabled" });
    const res = await call("POST", `/v1/runs/${runId}/pause`, { token: admin, body: {} });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ state: "pausing", hold: true });
  });

  it("survives a restart of the run object and its alarm", async () => {
    const { admin, runId } = await pausedWithCheckpoint();
    // A fresh instance over the same storage, as after an eviction or a deploy.
    await runInDurableObject(runStub(runId), async (_instance, state) => {
      const restarted = new RunObject(state, env);
      await restarted.alarm();
    });
    await runAlarm(runId);
    expect(await getRun(admin, runId)).toMatchObject({ state: "paused", hold: true, continuation: "implementing" });
  });
});

describe("an unusable checkpoint (POST /v1/runs/:id/attempts/:n/checkpoint-unusable)", () => {
  it("returns the claimed continuation to paused with the hold and the recovery problem", async () => {
    const { admin, runner, runId } = await pausedWithCheckpoint();
    await call("POST", `/v1/runs/${runId}/resume`, { token: admin, body: {} });
    await claim(runner.token, 0);
    const res = await attemptCall(runner.token, runId, 2, "checkpoint-unusable", { reason: "the patch does not apply to the source revision" });
    expect(res.status).toBe(200);
    expect(res.body.state).toBe("paused");
    const run = await getRun(admin, runId);
    expect(run).toMatchObject({ state: "paused", hold: true, machine_id: null, continuation: "implementing" });
    expect(run.recovery_problem).toContain("the patch does not apply");
    expect(run.steps[1]).toMatchObject({ attempt: 2, outcome: "checkpoint_unusable" });
    // The operator may try again once the cause is fixed: the checkpoint is kept.
    const again = await call("POST", `/v1/runs/${runId}/resume`, { token: admin, body: {} });
    expect(again.body).toMatchObject({ state: "queued", recovery_problem: null });
  });

  it("is refused from another machine and after launch", async () => {
    const { admin, runner, runId } = await pausedWithCheckpoint();
    const other = await registerRunner(admin, { name: "other" });
    await call("POST", `/v1/runs/${runId}/resume`, { token: admin, body: {} });
    await claim(runner.token, 0);
    const foreign = await attemptCall(other.token, runId, 2, "checkpoint-unusable", { reason: "x" });
    expect(foreign.status).toBe(409);
    expect(foreign.body.error.code).toBe("other_machine");
    await attemptCall(runner.token, runId, 2, "launched", { sandbox_id: "sbx-2" });
    const late = await attemptCall(runner.token, runId, 2, "checkpoint-unusable", { reason: "x" });
    expect(late.status).toBe(409);
    expect(late.body.error).toMatchObject({ code: "invalid_transition", state: "implementing" });
  });
});

describe("a daemon that finishes while pausing", () => {
  it("leaves the run paused with the recovery problem recorded, not silently resumable", async () => {
    const { admin, runId, attemptToken } = await launchedRun();
    await call("POST", `/v1/runs/${runId}/pause`, { token: admin, body: {} });
    await report(attemptToken, runId, { final: { outcome: "completed", artifact: { patch: PATCH } } });
    const run = await getRun(admin, runId);
    expect(run.state).toBe("paused");
    expect(run.recovery_problem).toContain("no checkpoint");
    expect((await call("POST", `/v1/runs/${runId}/resume`, { token: admin, body: {} })).body.error.code).toBe("checkpoint_missing");
  });
});
