// Lease waits (docs/protocol.md, "Lease waits"): a lease or launched call with wait_ms renews the
// lease at once and answers when the run's directives change, so a stop reaches the runner pushed.
// No assertion is on time: a wait that is never woken answers only at LEASE_WAIT_MAX_MS (20 s by
// default), past these tests' own timeout, so a missing wake-up fails them.

import { describe, expect, it } from "vitest";
import { attemptCall, call, claim, createOrg, dispatch, getRun, launchedRun, registerRunner, report, sleep } from "./helpers";

const LONGER_THAN_THE_BOUND = 600_000;
/** Below LEASE_WAIT_MAX_MS: a call that waited out its bound fails the test by timeout. */
const WOKEN_TIMEOUT = { timeout: 15_000 };

/** Until the run shows a lease renewed past `before`: the waiting call has started. */
async function leaseRenewedPast(admin: string, runId: string, before: number) {
  for (let i = 0; i < 200; i++) {
    if ((await getRun(admin, runId)).lease_expires_at_ms > before) return;
    await sleep(10);
  }
  throw new Error("the waiting lease call never renewed the lease");
}

describe("lease waits", () => {
  it("a waiting lease answers stop_requested as soon as the run is cancelled", WOKEN_TIMEOUT, async () => {
    const { admin, runner, runId } = await launchedRun();
    const leaseBefore = (await getRun(admin, runId)).lease_expires_at_ms;
    await sleep(5);
    let cancelAnswered = false;
    const waiting = attemptCall(runner.token, runId, 1, "lease", { wait_ms: LONGER_THAN_THE_BOUND }).then((res) => ({ res, afterCancel: cancelAnswered }));
    await leaseRenewedPast(admin, runId, leaseBefore);
    const cancel = await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: { reason: "stop now" } });
    cancelAnswered = true;
    expect(cancel.status).toBe(202);
    const { res } = await waiting;
    expect(res.status).toBe(200);
    expect(res.body.stop_requested).toBe(true);
    expect(res.body.state).toBe("implementing");
  });

  it("the waiting call had not answered before the cancel", WOKEN_TIMEOUT, async () => {
    const { admin, runner, runId } = await launchedRun();
    const leaseBefore = (await getRun(admin, runId)).lease_expires_at_ms;
    await sleep(5);
    let answered = false;
    const waiting = attemptCall(runner.token, runId, 1, "lease", { wait_ms: LONGER_THAN_THE_BOUND }).then((res) => ((answered = true), res));
    await leaseRenewedPast(admin, runId, leaseBefore);
    expect(answered).toBe(false);
    await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: {} });
    expect((await waiting).body.stop_requested).toBe(true);
  });

  it("a stop already requested is answered at once, without waiting", WOKEN_TIMEOUT, async () => {
    const { admin, runner, runId } = await launchedRun();
    await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: {} });
    const res = await attemptCall(runner.token, runId, 1, "lease", { wait_ms: LONGER_THAN_THE_BOUND });
    expect(res.status).toBe(200);
    expect(res.body.stop_requested).toBe(true);
  });

  it("a waiting launched call answers task_gone when the daemon's final report ends the run", WOKEN_TIMEOUT, async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    const grant = (await claim(runner.token, 0)).body;
    let answered = false;
    const waiting = attemptCall(runner.token, runId, 1, "launched", { sandbox_id: "sbx-1", wait_ms: LONGER_THAN_THE_BOUND }).then((res) => ((answered = true), res));
    for (let i = 0; i < 200 && (await getRun(admin, runId)).state !== "implementing"; i++) await sleep(10);
    expect(answered).toBe(false);
    const final = await report(grant.attempt_token, runId, { final: { outcome: "completed", artifact: { patch: "" } } });
    expect(final.body.state).toBe("completed");
    const res = await waiting;
    expect(res.status).toBe(410);
    expect(res.body.error.code).toBe("task_gone");
    expect(res.body.error.state).toBe("completed");
  });

  it("a wait that nothing wakes answers the attempt unchanged at its end, the lease renewed", async () => {
    const { admin, runner, runId } = await launchedRun();
    const leaseBefore = (await getRun(admin, runId)).lease_expires_at_ms;
    await sleep(5);
    const res = await attemptCall(runner.token, runId, 1, "lease", { wait_ms: 50 });
    expect(res.status).toBe(200);
    expect(res.body.stop_requested).toBe(false);
    expect(res.body.lease_expires_at_ms).toBeGreaterThan(leaseBefore);
  });

  it("past LEASE_WAITERS_MAX (4) waiting calls, one more answers at once; the waiting ones still get the stop", WOKEN_TIMEOUT, async () => {
    const { admin, runner, runId } = await launchedRun();
    let cancelled = false;
    const calls = Array.from({ length: 5 }, () =>
      attemptCall(runner.token, runId, 1, "lease", { wait_ms: LONGER_THAN_THE_BOUND }).then((res) => ({ res, afterCancel: cancelled })),
    );
    // Whichever call arrives fifth finds four waiting and answers without waiting.
    const first = await Promise.race(calls);
    expect(first.res.status).toBe(200);
    expect(first.res.body.stop_requested).toBe(false);
    cancelled = true;
    await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: {} });
    const woken = (await Promise.all(calls)).filter((c) => c.afterCancel && c.res.body.stop_requested === true);
    expect(woken).toHaveLength(4);
  });

  it("a bad wait_ms is a 400 and renews nothing", async () => {
    const { admin, runner, runId } = await launchedRun();
    const leaseBefore = (await getRun(admin, runId)).lease_expires_at_ms;
    for (const wait_ms of [-1, 1.5, "20000", 600_001]) {
      const res = await attemptCall(runner.token, runId, 1, "lease", { wait_ms });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe("invalid_request");
    }
    expect((await getRun(admin, runId)).lease_expires_at_ms).toBe(leaseBefore);
  });
});
