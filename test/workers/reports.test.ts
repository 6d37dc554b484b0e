// Daemon reports are idempotent end to end (docs/protocol.md, "Daemon reports"): each carries a
// per-attempt `seq`; a retry after a lost answer sends the same seq and changes nothing, a final
// report replayed after it ended the run answers the same success instead of 410 task_gone.

import { describe, expect, it } from "vitest";
import { attemptCall, call, getRun, launchedRun, report } from "./helpers";

async function outputEvents(admin: string, runId: string) {
  const res = await call("GET", `/v1/runs/${runId}/events?limit=1000`, { token: admin });
  expect(res.status).toBe(200);
  return (res.body.events as Array<{ type: string; data: Record<string, unknown> }>).filter((e) => e.type === "run.output");
}

describe("report sequence numbers", () => {
  it("a progress report retried with the same seq adds no second run.output event and answers the same", async () => {
    const { admin, runId, attemptToken } = await launchedRun();
    const body = { seq: 1, phase: "planning", lines: ["reading the code"] };
    const first = await report(attemptToken, runId, body);
    expect(first.status).toBe(200);
    const before = await getRun(admin, runId);
    const retry = await report(attemptToken, runId, body);
    expect(retry.status).toBe(200);
    expect(retry.body).toEqual(first.body);
    expect((await outputEvents(admin, runId)).map((e) => e.data.lines)).toEqual([["reading the code"]]);
    expect(await getRun(admin, runId)).toEqual(before);
    // The next seq is new work again.
    expect((await report(attemptToken, runId, { seq: 2, lines: ["editing"] })).status).toBe(200);
    expect((await outputEvents(admin, runId)).map((e) => e.data.lines)).toEqual([["reading the code"], ["editing"]]);
  });

  it("a report with a seq older than the last accepted one is 409 stale_report and changes nothing", async () => {
    const { admin, runId, attemptToken } = await launchedRun();
    await report(attemptToken, runId, { seq: 1, lines: ["one"] });
    await report(attemptToken, runId, { seq: 2, lines: ["two"] });
    const before = await getRun(admin, runId);
    const stale = await report(attemptToken, runId, { seq: 1, lines: ["one, late"], final: { outcome: "failed", error: "late" } });
    expect(stale.status).toBe(409);
    expect(stale.body.error).toMatchObject({ code: "stale_report", last_report_seq: 2, state: "implementing" });
    expect(await getRun(admin, runId)).toEqual(before);
    expect((await outputEvents(admin, runId)).map((e) => e.data.lines)).toEqual([["one"], ["two"]]);
  });

  it("a final report replayed after it ended the run answers 200 with the same body, not 410 task_gone", async () => {
    const { admin, runId, attemptToken } = await launchedRun();
    const final = { seq: 3, lines: ["done"], final: { outcome: "completed", artifact: { patch: "diff --git a b" }, cost_cents: 7 } };
    await report(attemptToken, runId, { seq: 1, lines: ["start"] });
    const accepted = await report(attemptToken, runId, final);
    expect(accepted.status).toBe(200);
    expect(accepted.body).toMatchObject({ state: "completed", attempt: 1 });
    const done = await getRun(admin, runId);
    const replay = await report(attemptToken, runId, final);
    expect(replay.status).toBe(200);
    expect(replay.body).toEqual(accepted.body);
    expect(await getRun(admin, runId)).toEqual(done);
    expect((await outputEvents(admin, runId)).map((e) => e.data.lines)).toEqual([["start"], ["done"]]);
  });

  it("a final report the run never accepted meets 410 task_gone once a cancel ended the run", async () => {
    const { admin, runner, runId, attemptToken } = await launchedRun();
    await report(attemptToken, runId, { seq: 1, lines: ["start"] });
    expect((await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: {} })).status).toBe(202);
    expect((await attemptCall(runner.token, runId, 1, "stopped", { sandbox_id: "sbx-1" })).body.state).toBe("cancelled");
    const gone = await report(attemptToken, runId, { seq: 2, final: { outcome: "completed", artifact: { patch: "" } } });
    expect(gone.status).toBe(410);
    expect(gone.body.error).toMatchObject({ code: "task_gone", state: "cancelled" });
    // The last report it did accept, replayed, is still a success: it was accepted.
    expect((await report(attemptToken, runId, { seq: 1, lines: ["start"] })).status).toBe(200);
    expect((await getRun(admin, runId)).state).toBe("cancelled");
  });

  it("seq must be a whole number from 1", async () => {
    const { admin, runId, attemptToken } = await launchedRun();
    const before = await getRun(admin, runId);
    for (const seq of [0, -1, 1.5, "1"]) {
      const res = await report(attemptToken, runId, { seq, lines: ["x"] });
      expect(res.status, String(seq)).toBe(400);
      expect(res.body.error.code).toBe("invalid_request");
    }
    expect(await getRun(admin, runId)).toEqual(before);
    expect((await report(attemptToken, runId, { seq: 1, lines: ["x"] })).status).toBe(200);
  });
});
