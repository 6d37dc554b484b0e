import { describe, expect, it } from "vitest";
import { attemptCall, call, claim, createOrg, dispatch, getRun, registerRunner, report } from "./helpers";

describe("large artifacts", () => {
  it("a final report with a 3 MB patch completes the run and the patch reads back whole", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    const c = (await claim(runner.token, 0)).body;
    await attemptCall(runner.token, runId, 1, "launched", { sandbox_id: "s" });
    const patch = "+" + "x".repeat(3 * 1024 * 1024) + "\n";
    const res = await report(c.attempt_token, runId, { final: { outcome: "completed", artifact: { patch } } });
    expect(res.status).toBe(200);
    const run = await getRun(admin, runId);
    expect(run.state).toBe("completed");
    expect(run.artifact.patch.length).toBe(patch.length);
  });
});

describe("report output", () => {
  it("output past the per-report bound is dropped with a note, and the report still lands", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    const c = (await claim(runner.token, 0)).body;
    const lines = Array.from({ length: 400 }, (_, i) => `${i} ${"y".repeat(3_000)}`);
    const res = await report(c.attempt_token, runId, { phase: "implementing", lines });
    expect(res.status).toBe(200);
    const events = (await call("GET", `/v1/runs/${runId}/events`, { token: admin })).body.events;
    const output = events.find((e: { type: string }) => e.type === "run.output");
    const kept: string[] = output.data.lines;
    expect(kept.length).toBeLessThan(lines.length);
    expect(kept[kept.length - 1]).toMatch(/more lines dropped/);
    expect(kept.join("").length).toBeLessThanOrEqual(48_000 + 100);
  });
});
