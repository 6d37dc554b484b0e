// Why a run waits: GET /v1/runs/:id and GET /v1/queue explain a queued run (docs/protocol.md, "Why a run waits").

import { describe, expect, it, onTestFinished } from "vitest";
import { SCHEDULER_GATES, type SchedulerGate } from "../../src/run/waiting";
import { attemptCall, call, claim, createOrg, dispatch, getRun, registerRunner, runStub } from "./helpers";

describe("why a run waits", () => {
  it("with no runner connected, a queued run names the protocol and labels a runner would need", async () => {
    const { admin } = await createOrg();
    const id = await dispatch(admin, { labels: ["gpu"] });
    const run = await getRun(admin, id);
    expect(run.waiting).toMatchObject({
      reason: "no_runner",
      detail: { missing_labels: ["gpu"], missing_protocol: "process", connected_runners: 0, closest_runner: null },
    });
    expect(run.waiting.detail.message).toContain("no runner is connected");
  });

  it("names the labels the closest connected runner lacks, and a protocol no connected runner speaks", async () => {
    const { admin } = await createOrg();
    const linux = await registerRunner(admin, { name: "linux", labels: ["linux"] });
    await registerRunner(admin, { name: "bare", labels: [] });
    const gpu = await getRun(admin, await dispatch(admin, { labels: ["linux", "gpu"] }));
    expect(gpu.waiting).toMatchObject({
      reason: "no_runner",
      detail: { missing_labels: ["gpu"], missing_protocol: null, connected_runners: 2, closest_runner: linux.machineId },
    });
    expect(gpu.waiting.detail.message).toContain(`closest (${linux.machineId}) lacks labels gpu`);
    const docker = await getRun(admin, await dispatch(admin, { labels: ["linux"], launch: { protocol: "docker", command: ["x"] } }));
    expect(docker.waiting).toMatchObject({ reason: "no_runner", detail: { missing_protocol: "docker", missing_labels: [] } });
  });

  it("a covered run is next in its queue or behind the runs ahead of it, higher priority first", async () => {
    const { admin } = await createOrg();
    await registerRunner(admin, { labels: ["linux"] });
    const low = await dispatch(admin, { labels: ["linux"] });
    const high = await dispatch(admin, { labels: ["linux"], priority: 9 });
    const other = await dispatch(admin, { labels: [] });
    expect((await getRun(admin, high)).waiting).toMatchObject({ reason: "next_in_queue", detail: { ahead: 0 } });
    expect((await getRun(admin, low)).waiting).toMatchObject({ reason: "behind_runs", detail: { ahead: 1, message: "behind 1 run in its queue" } });
    // Another label set is another queue.
    expect((await getRun(admin, other)).waiting).toMatchObject({ reason: "next_in_queue" });
    const queue = await call("GET", "/v1/queue", { token: admin });
    expect(queue.status).toBe(200);
    expect(queue.body.truncated).toBe(false);
    expect(queue.body.runs.map((r: any) => [r.id, r.waiting.reason])).toEqual([
      [high, "next_in_queue"],
      [low, "behind_runs"],
      [other, "next_in_queue"],
    ]);
    expect((await call("GET", "/v1/queue?limit=1", { token: admin })).body).toMatchObject({ truncated: true, runs: [{ id: high }] });
  });

  it("a run whose launch failed waits out its backoff until a named time; a claimed run is not waiting", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const id = await dispatch(admin);
    const claimed = await claim(runner.token);
    expect(claimed.body.run_id).toBe(id);
    expect((await getRun(admin, id)).waiting).toBeNull();
    expect((await attemptCall(runner.token, id, 1, "launch-failed", { error: "image pull failed" })).status).toBe(200);
    const run = await getRun(admin, id);
    expect(run.state).toBe("queued");
    expect(run.not_before_ms).toBeGreaterThan(Date.now());
    expect(run.waiting).toEqual({
      reason: "launch_backoff",
      detail: { message: `its last launch failed; it backs off until ${new Date(run.not_before_ms).toISOString()}`, until_ms: run.not_before_ms },
    });
  });

  it("an operator hold is named as the reason, before anything else", async () => {
    const { orgId, admin } = await createOrg();
    const id = await dispatch(admin, { labels: ["nowhere"] });
    await runStub(id).control(orgId, { type: "pause", hold: true, reason: "operator hold" });
    const run = await getRun(admin, id);
    expect(run.state).toBe("paused");
    expect(run.waiting).toMatchObject({ reason: "operator_hold" });
    await runStub(id).control(orgId, { type: "resume", by: "operator" });
    expect((await getRun(admin, id)).waiting).toMatchObject({ reason: "no_runner" });
  });

  it("a scheduler gate that holds a run is named after an operator hold and before backoff, runners and queue position", async () => {
    const { admin } = await createOrg();
    await registerRunner(admin);
    const held = await dispatch(admin);
    const free = await dispatch(admin);
    const gate: SchedulerGate = async (_env, run) =>
      run.id === held ? { reason: "scheduler_gate", detail: { message: "its project is paused", gate: "project_paused" } } : null;
    SCHEDULER_GATES.push(gate);
    onTestFinished(() => void SCHEDULER_GATES.splice(SCHEDULER_GATES.indexOf(gate), 1));
    expect((await getRun(admin, held)).waiting).toEqual({ reason: "scheduler_gate", detail: { message: "its project is paused", gate: "project_paused" } });
    expect((await getRun(admin, free)).waiting).toMatchObject({ reason: "behind_runs", detail: { ahead: 1 } });
    const queue = await call("GET", "/v1/queue", { token: admin });
    expect(queue.body.runs.map((r: any) => r.waiting.reason)).toEqual(["scheduler_gate", "behind_runs"]);
  });

  it("the queue is the caller's organization's only, and a bad limit is a structured 400", async () => {
    const a = await createOrg("a");
    const b = await createOrg("b");
    await dispatch(a.admin);
    expect((await call("GET", "/v1/queue", { token: b.admin })).body.runs).toEqual([]);
    const bad = await call("GET", "/v1/queue?limit=0", { token: a.admin });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("invalid_request");
    expect((await call("GET", "/v1/queue")).status).toBe(401);
  });
});
