// The claim path reads only label sets with queued work: a set whose queue a claim finds empty is
// removed, and a run that becomes queued again (requeued, resumed) brings its set back
// (durable-objects/scheduler-object.ts, src/run/projection.ts). Docket-Cost gives what a claim read.

import { createScheduledController } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import worker from "../../src/index";
import { ageRun, attemptCall, call, claim, createOrg, dispatch, getRun, parseCost, registerRunner, runAlarm, setSchedulerConfig } from "./helpers";

const SETS = 20;
const LABELS = Array.from({ length: SETS }, (_, i) => `l${i}`);

async function labelSets(orgId: string): Promise<string[]> {
  const rows = await env.DB.prepare("SELECT labels_key FROM label_sets WHERE org_id = ? ORDER BY labels_key").bind(orgId).all<{ labels_key: string }>();
  return rows.results.map((r) => r.labels_key);
}

describe("label sets in the claim path", () => {
  it("after 20 label sets had work and drained, a claim reads no more than in an organization that only ever used one set", async () => {
    const drained = await createOrg("drained");
    const runner = await registerRunner(drained.admin, { labels: LABELS });
    for (const label of LABELS) await dispatch(drained.admin, { labels: [label] });
    expect(await labelSets(drained.orgId)).toHaveLength(SETS);
    for (let i = 0; i < SETS; i++) expect((await claim(runner.token, 0)).status).toBe(200);
    // The first claim that finds nothing removes the emptied sets.
    expect((await claim(runner.token, 0)).status).toBe(204);
    expect(await labelSets(drained.orgId)).toEqual([]);
    await dispatch(drained.admin, { labels: ["l0"] });
    expect(await labelSets(drained.orgId)).toEqual(["process|l0"]);
    const afterDrain = await claim(runner.token, 0);
    expect(afterDrain.status).toBe(200);

    // The same history in the one set l0 alone: one run claimed, then another dispatched.
    const fresh = await createOrg("fresh");
    const freshRunner = await registerRunner(fresh.admin, { labels: LABELS });
    await dispatch(fresh.admin, { labels: ["l0"] });
    expect((await claim(freshRunner.token, 0)).status).toBe(200);
    expect((await claim(freshRunner.token, 0)).status).toBe(204);
    await dispatch(fresh.admin, { labels: ["l0"] });
    const inFresh = await claim(freshRunner.token, 0);
    expect(inFresh.status).toBe(200);
    // Reading the 19 drained sets would cost 19 more label_sets rows, and their queue heads more.
    // Slack: one row for the larger runs table of the organization with 21 runs, and one for the
    // sweep row, which a claim reads again once CLAIM_SWEEP_TTL_MS (1 s) has passed since the last
    // read: on a loaded machine one of the two claims may do so and the other not.
    const largerRunsTable = 1;
    const sweepRow = 1;
    const drainedCost = parseCost(afterDrain.headers.get("Docket-Cost"));
    const oneSetCost = parseCost(inFresh.headers.get("Docket-Cost"));
    expect(drainedCost.d1_rows_read).toBeLessThanOrEqual(oneSetCost.d1_rows_read + largerRunsTable + sweepRow);
    expect(drainedCost.do_requests).toBe(oneSetCost.do_requests);
  });

  it("a claim reads at most CLAIM_LABEL_SETS_MAX queue heads, in a window that moves on so every set gets its turn", async () => {
    const { admin, orgId } = await createOrg();
    const runner = await registerRunner(admin, { labels: LABELS });
    const runIds = new Set<string>();
    for (const label of LABELS.slice(0, 5)) runIds.add(await dispatch(admin, { labels: [label] }));
    // This organization's scheduler reads two queue heads per claim.
    await setSchedulerConfig(orgId, { claimLabelSetsMax: 2 });
    const claimed = new Set<string>();
    for (let i = 0; i < 5; i++) {
      const res = await claim(runner.token, 0);
      expect(res.status).toBe(200);
      claimed.add(res.body.run_id);
    }
    expect(claimed).toEqual(runIds);
  });

  it("a run requeued into a label set that was removed is still claimed", async () => {
    const { admin, orgId } = await createOrg();
    const runner = await registerRunner(admin, { labels: ["solo"] });
    const runId = await dispatch(admin, { labels: ["solo"] });
    expect((await claim(runner.token, 0)).body.run_id).toBe(runId);
    expect((await claim(runner.token, 0)).status).toBe(204);
    expect(await labelSets(orgId)).toEqual([]);
    const failed = await attemptCall(runner.token, runId, 1, "launch-failed", { error: "image pull failed" });
    expect(failed.status).toBe(200);
    expect((await getRun(admin, runId)).state).toBe("queued");
    expect(await labelSets(orgId)).toEqual(["process|solo"]);
    // Past its backoff, the run's alarm tells the scheduler; the next claim gets attempt 2.
    await ageRun(runId, 60_000);
    await runAlarm(runId);
    const again = await claim(runner.token, 0);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ run_id: runId, attempt: 2 });
  });

  it("the cron tick removes a label set no runner covers once its queued runs were cancelled", async () => {
    const { admin, orgId } = await createOrg();
    const runIds = [await dispatch(admin, { labels: ["nobody-has-this"] }), await dispatch(admin, { labels: ["nobody-has-this"] })];
    const kept = await dispatch(admin, { labels: ["still-waiting"] });
    for (const id of runIds) expect((await call("POST", `/v1/runs/${id}/cancel`, { token: admin, body: {} })).status).toBe(200);
    expect(await labelSets(orgId)).toEqual(["process|nobody-has-this", "process|still-waiting"]);
    await worker.scheduled(createScheduledController({ scheduledTime: Date.now(), cron: "* * * * *" }), env);
    expect(await labelSets(orgId)).toEqual(["process|still-waiting"]);
    expect((await getRun(admin, kept)).state).toBe("queued");
  });

  it("a set whose only queued run waits out a backoff is kept", async () => {
    const { admin, orgId } = await createOrg();
    const runner = await registerRunner(admin, { labels: ["wait"] });
    const runId = await dispatch(admin, { labels: ["wait"] });
    await claim(runner.token, 0);
    await attemptCall(runner.token, runId, 1, "launch-failed", { error: "image pull failed" });
    expect((await claim(runner.token, 0)).status).toBe(204); // in backoff: nothing claimable yet
    expect(await labelSets(orgId)).toEqual(["process|wait"]);
  });
});
