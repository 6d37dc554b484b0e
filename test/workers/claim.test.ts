import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { attemptCall, call, claim, CLI_VERSION, createOrg, dispatch, getRun, registerRunner, runStub, sleep, untilClaimWaits } from "./helpers";

/** The longest a claim waits in these tests (vitest.config.ts sets CLAIM_WAIT_MS to 1 s). */
const CLAIM_WAIT_MS = Number((env as unknown as Record<string, string>).CLAIM_WAIT_MS);

/**
 * A claim that nothing should end early: it must answer 204 no sooner than its whole wait. (A claim
 * ended by another's claim or a cancel answers at once.) A lower bound only, so a slow machine
 * cannot fail it.
 */
async function waitedOut(machineToken: string) {
  const started = Date.now();
  expect((await claim(machineToken, 20_000)).status).toBe(204);
  expect(Date.now() - started).toBeGreaterThanOrEqual(CLAIM_WAIT_MS - 20);
}

describe("claiming work", () => {
  it("a claim with nothing queued answers 204 after its wait", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const res = await claim(runner.token, 50);
    expect(res.status).toBe(204);
  });

  it("a waiting long-poll is answered the moment matching work is dispatched", async () => {
    // A first dispatch in this file's runtime is slow on a busy machine: made elsewhere first, so the
    // one below comes well within the claim's wait (CLAIM_WAIT_MS here is 1 s).
    await dispatch((await createOrg()).admin);
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const waiting = claim(runner.token, 20_000);
    await new Promise((r) => setTimeout(r, 100));
    const runId = await dispatch(admin);
    const res = await waiting;
    expect(res.status).toBe(200);
    expect(res.body.run_id).toBe(runId);
  });

  it("matches runner labels: a run needing labels the machine lacks stays queued", async () => {
    const { admin } = await createOrg();
    const plain = await registerRunner(admin, { labels: ["linux"] });
    const gpu = await registerRunner(admin, { labels: ["linux", "gpu"] });
    const gpuRun = await dispatch(admin, { labels: ["gpu"] });
    expect((await claim(plain.token, 0)).status).toBe(204);
    expect((await getRun(admin, gpuRun)).state).toBe("queued");
    const res = await claim(gpu.token, 0);
    expect(res.body.run_id).toBe(gpuRun);
  });

  it("matches launch protocols: a docker run goes only to a runner that offers docker", async () => {
    const { admin } = await createOrg();
    const processOnly = await registerRunner(admin, { protocols: ["process"] });
    const dockerRun = await dispatch(admin, { launch: { protocol: "docker", command: ["x"], image: "node:20" } });
    expect((await claim(processOnly.token, 0)).status).toBe(204);
    const both = await registerRunner(admin, { protocols: ["process", "docker"] });
    const res = await call("POST", "/v1/runners/claim", {
      token: both.token,
      body: { cli_version: CLI_VERSION, protocols: ["process", "docker"], wait_ms: 0 },
    });
    expect(res.body.run_id).toBe(dockerRun);
    expect(res.body.launch).toMatchObject({ protocol: "docker", image: "node:20" });
  });

  it("orders new work by priority (highest first), then oldest", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const oldLow = await dispatch(admin, { priority: 1 });
    const high = await dispatch(admin, { priority: 9 });
    const newerLow = await dispatch(admin, { priority: 1 });
    const order: string[] = [];
    for (let i = 0; i < 3; i++) order.push((await claim(runner.token, 0)).body.run_id);
    expect(order).toEqual([high, oldLow, newerLow]);
  });

  it("a run paused while executing resumes before higher-priority new work", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const first = await dispatch(admin, { priority: 0 });
    const got = await claim(runner.token, 0);
    expect(got.body.run_id).toBe(first);
    await attemptCall(runner.token, first, 1, "launched", { sandbox_id: "s1" });
    const org = (await getRun(admin, first)).org_id;
    const high = await dispatch(admin, { priority: 100 });
    await runStub(first).control(org, { type: "pause", hold: false, reason: "window closed" });
    await call("POST", `/v1/runs/${first}/attempts/1/checkpoint`, { token: got.body.attempt_token, body: { patch: "" } });
    expect((await getRun(admin, first)).state).toBe("paused");
    await runStub(first).control(org, { type: "resume", by: "operator" });
    expect((await claim(runner.token, 0)).body.run_id).toBe(first);
    expect((await claim(runner.token, 0)).body.run_id).toBe(high);
  });

  it("200 concurrent claims racing for 20 runs: every run is claimed exactly once, nothing is lost", async () => {
    const { admin } = await createOrg();
    const runners = await Promise.all(Array.from({ length: 10 }, (_, i) => registerRunner(admin, { name: `r${i}` })));
    const runIds = new Set<string>();
    for (let i = 0; i < 20; i++) runIds.add(await dispatch(admin));
    const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => claim(runners[i % 10].token, 0)));
    const granted = answers.filter((a) => a.status === 200).map((a) => a.body.run_id as string);
    expect(granted.sort()).toEqual([...runIds].sort());
    for (const runId of runIds) {
      const run = await getRun(admin, runId);
      expect(run.state).toBe("claimed");
      expect(run.attempt).toBe(1);
      expect(run.steps).toHaveLength(1);
    }
  });

  it("a machine's new claim ends the one it left waiting (204), and work dispatched after goes to the new one", async () => {
    const { orgId, admin } = await createOrg();
    const runner = await registerRunner(admin);
    // A listener's claim waits; the listener restarts and claims again, its old connection still open.
    const abandoned = claim(runner.token, 20_000);
    await untilClaimWaits(orgId);
    const fresh = claim(runner.token, 20_000);
    // The old claim ends at once, not at its wait's end (CLAIM_WAIT_MS here is 1 s): a run
    // dispatched now goes to the new claim (a claim still waiting from before would be served first).
    await Promise.race([abandoned, sleep(300)]);
    const runId = await dispatch(admin);
    expect(await fresh).toMatchObject({ status: 200, body: { run_id: runId, attempt: 1 } });
    expect((await abandoned).status).toBe(204);
    // Other machines' claims are left waiting.
    const other = await registerRunner(admin, { name: "other" });
    const otherWaiting = waitedOut(other.token);
    await untilClaimWaits(orgId);
    expect((await claim(runner.token, 0)).status).toBe(204);
    await otherWaiting;
  });

  it("a stopping runner's claim cancel ends its waiting claim (204): a run dispatched after stays queued for a runner that is there", async () => {
    const { orgId, admin } = await createOrg();
    const runner = await registerRunner(admin);
    const cancel = (token: string, body: unknown = {}) => call("POST", "/v1/runners/claim/cancel", { token, body });
    expect(await cancel(runner.token)).toMatchObject({ status: 200, body: { machine_id: runner.machineId, ended: 0 } });

    const waiting = claim(runner.token, 20_000);
    await untilClaimWaits(orgId);
    expect(await cancel(runner.token)).toMatchObject({ status: 200, body: { ended: 1 } });
    const runId = await dispatch(admin);
    expect((await waiting).status).toBe(204);
    expect(await getRun(admin, runId)).toMatchObject({ state: "queued", attempt: 0 });
    expect((await claim(runner.token, 0)).body).toMatchObject({ run_id: runId, attempt: 1 });

    // A body is refused and changes nothing; so is another kind of token.
    const other = await registerRunner(admin, { name: "other" });
    const otherWaiting = waitedOut(other.token);
    await untilClaimWaits(orgId);
    expect((await cancel(other.token, { wait_ms: 0 })).body.error).toMatchObject({ code: "invalid_request" });
    expect((await cancel(admin)).status).toBe(401);
    await otherWaiting;
  });

  it("a stale queue row is refused by the run object and repaired", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: {} });
    // Make the D1 row lie, as a lost projection write would.
    await env.DB.prepare("UPDATE runs SET state = 'queued', version = 1 WHERE id = ?").bind(runId).run();
    expect((await claim(runner.token, 0)).status).toBe(204);
    const row = await env.DB.prepare("SELECT state FROM runs WHERE id = ?").bind(runId).first<{ state: string }>();
    expect(row?.state).toBe("cancelled");
    expect((await getRun(admin, runId)).state).toBe("cancelled");
  });
});
