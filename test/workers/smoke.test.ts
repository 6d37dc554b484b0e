import { describe, expect, it } from "vitest";
import { attemptCall, call, claim, createOrg, dispatch, getRun, registerRunner, report } from "./helpers";

describe("the dispatch spec's manual smoke, through the HTTP API", () => {
  it("a run dispatched with no runner stays queued; a runner registers, claims, launches and reports, and the run completes", async () => {
    const { admin } = await createOrg();
    const runId = await dispatch(admin);
    expect((await getRun(admin, runId)).state).toBe("queued");

    const runner = await registerRunner(admin);
    const claimed = await claim(runner.token, 0);
    expect(claimed.status).toBe(200);
    expect(claimed.body.run_id).toBe(runId);
    expect(claimed.body.attempt).toBe(1);
    expect((await getRun(admin, runId)).state).toBe("claimed");

    const launched = await attemptCall(runner.token, runId, 1, "launched", { sandbox_id: "sbx-1" });
    expect(launched.status).toBe(200);
    expect(launched.body.state).toBe("implementing");

    const progress = await report(claimed.body.attempt_token, runId, { phase: "implementing", lines: ["hello"] });
    expect(progress.status).toBe(200);
    const final = await report(claimed.body.attempt_token, runId, {
      final: { outcome: "completed", exit_codes: { agent: 0 }, artifact: { patch: "diff --git a/x b/x\n", source_revision: "abc1234" }, cost_cents: 12 },
    });
    expect(final.status).toBe(200);
    const run = await getRun(admin, runId);
    expect(run.state).toBe("completed");
    expect(run.artifact.patch).toContain("diff --git");
    expect(run.steps).toHaveLength(1);
    expect(run.steps[0].outcome).toBe("completed");

    const listed = await call("GET", "/v1/runs?state=completed", { token: admin });
    expect(listed.body.runs.map((r: { id: string }) => r.id)).toEqual([runId]);
  });
});
