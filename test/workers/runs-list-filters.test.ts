// GET /v1/runs as people look for runs: each listed run's title, repository, project, machine,
// start and end, and the filters by state, project, label and machine (docs/protocol.md, "Runs").

import { describe, expect, it } from "vitest";
import { admitReadyIssue, createProject, installRealAutopilotWithTracker } from "./autopilot-fakes";
import { finishRun } from "./events-helpers";
import { ageRun, attemptCall, call, claim, createOrg, dispatch, registerRunner, runAlarm } from "./helpers";

type Json = Record<string, any>;

async function listed(admin: string, query: string): Promise<{ status: number; body: Json; ids: string[] }> {
  const res = await call("GET", `/v1/runs${query}`, { token: admin });
  return { ...res, ids: (res.body.runs ?? []).map((r: Json) => r.id) };
}

describe("the runs list", () => {
  it("shows each run's brief's first line, repository, machine, first claim and end", async () => {
    const { admin } = await createOrg();
    const brief = "\n  Fix the flaky login test  \n\nIt fails one run in ten on CI.";
    const done = await dispatch(admin, { brief, repository: { url: "https://github.com/acme/web.git" } });
    const { runner } = await finishRun(admin, done);
    const long = await dispatch(admin, { brief: "x".repeat(300) });

    const { body } = await listed(admin, "");
    const [queued, ended] = body.runs;
    expect(ended).toMatchObject({ id: done, title: "Fix the flaky login test", repository: "https://github.com/acme/web.git", machine_id: runner.machineId, project_id: null });
    expect(ended.started_at_ms).toBeGreaterThan(0);
    expect(ended.ended_at_ms).toBeGreaterThanOrEqual(ended.started_at_ms);
    expect(queued).toMatchObject({ id: long, title: "x".repeat(200), repository: null, machine_id: null, started_at_ms: null, ended_at_ms: null });
  });

  it("filters by label exactly, by machine and by state, and a cursor keeps the filters", async () => {
    const { admin } = await createOrg();
    const gpu = [await dispatch(admin, { labels: ["gpu", "linux"] }), await dispatch(admin, { labels: ["gpu"] }), await dispatch(admin, { labels: ["gpu"] })];
    const gpu2 = await dispatch(admin, { labels: ["gpu2"] });
    const plain = await dispatch(admin);
    const box = await registerRunner(admin, { name: "box" });
    expect((await claim(box.token)).body.run_id).toBe(plain);

    expect((await listed(admin, "?label=gpu")).ids).toEqual([...gpu].reverse());
    expect((await listed(admin, "?label=gpu2")).ids).toEqual([gpu2]);
    expect((await listed(admin, "?label=gp")).ids).toEqual([]);
    // The protocol is not a label.
    expect((await listed(admin, "?label=process")).ids).toEqual([]);
    expect((await listed(admin, `?machine_id=${box.machineId}`)).ids).toEqual([plain]);
    expect((await listed(admin, "?state=claimed")).ids).toEqual([plain]);
    expect((await listed(admin, "?state=queued&label=linux")).ids).toEqual([gpu[0]]);

    const first = await listed(admin, "?label=gpu&limit=2");
    expect(first.ids).toEqual([gpu[2], gpu[1]]);
    const older = await listed(admin, `?label=gpu&limit=2&cursor=${encodeURIComponent(first.body.next_cursor)}`);
    expect(older.ids).toEqual([gpu[0]]);
    expect(older.body.next_cursor).toBeNull();
  });

  it("by machine, lists every run the machine claimed in any attempt, newest first, paged, with the other filters", async () => {
    const { admin } = await createOrg();
    const first = await registerRunner(admin, { name: "first" });
    const second = await registerRunner(admin, { name: "second" });
    // Attempt 1 on the first machine fails to launch; the run is queued again and the second machine claims attempt 2.
    const moved = await dispatch(admin);
    expect((await claim(first.token, 0)).body).toMatchObject({ run_id: moved, attempt: 1 });
    expect((await attemptCall(first.token, moved, 1, "launch-failed", { error: "image pull failed" })).status).toBe(200);
    await ageRun(moved, 60_000);
    await runAlarm(moved);
    expect((await claim(second.token, 0)).body).toMatchObject({ run_id: moved, attempt: 2 });
    const stays = [await dispatch(admin), await dispatch(admin)];
    for (const id of stays) expect((await claim(first.token, 0)).body.run_id).toBe(id);

    expect((await listed(admin, `?machine_id=${second.machineId}`)).ids).toEqual([moved]);
    const onFirst = await listed(admin, `?machine_id=${first.machineId}`);
    expect(onFirst.ids).toEqual([stays[1], stays[0], moved]);
    // The machine column is each run's latest attempt's.
    expect(onFirst.body.runs[2]).toMatchObject({ id: moved, machine_id: second.machineId, attempt: 2 });
    // Paged with a cursor that keeps the filter, and with the other filters beside it.
    const page1 = await listed(admin, `?machine_id=${first.machineId}&limit=2`);
    expect(page1.ids).toEqual([stays[1], stays[0]]);
    const page2 = await listed(admin, `?machine_id=${first.machineId}&limit=2&cursor=${encodeURIComponent(page1.body.next_cursor)}`);
    expect(page2.ids).toEqual([moved]);
    expect(page2.body.next_cursor).toBeNull();
    expect((await attemptCall(first.token, stays[0], 1, "launched", { sandbox_id: "sbx-1" })).status).toBe(200);
    expect((await listed(admin, `?machine_id=${first.machineId}&state=claimed`)).ids).toEqual([stays[1], moved]);
    expect((await listed(admin, `?machine_id=${first.machineId}&state=implementing`)).ids).toEqual([stays[0]]);
    // Another organization's machine id lists nothing here.
    const other = await createOrg("elsewhere");
    expect((await listed(other.admin, `?machine_id=${first.machineId}`)).ids).toEqual([]);
  });

  it("filters by the autopilot project that admitted the run, titled with its issue's title", async () => {
    const fake = installRealAutopilotWithTracker();
    const { admin } = await createOrg();
    const project = await createProject(admin);
    const other = await createProject(admin, { name: "another autopilot", repository: "Codertocat/Other" });
    const admitted = await admitReadyIssue(fake, project.id, 7);
    await dispatch(admin);

    const { ids, body } = await listed(admin, `?project_id=${project.id}`);
    expect(ids).toEqual([admitted]);
    expect(body.runs[0]).toMatchObject({ project_id: project.id, title: fake.tracker(project.id).issues.get(7)?.facts.title });
    expect((await listed(admin, `?project_id=${other.id}`)).ids).toEqual([]);
    expect((await call("GET", "/v1/queue", { token: admin })).body.runs.find((r: Json) => r.id === admitted)).toMatchObject({ project_id: project.id, title: body.runs[0].title });
  });

  it("a malformed filter is 400 invalid_request saying what the filter takes, and lists nothing", async () => {
    const { admin } = await createOrg();
    await dispatch(admin);
    const malformed = [
      ["?label=a,b", "labels are letters, digits and _ . : / -"],
      ["?machine_id=box", "must be a machine id like mch_<24 hex digits>"],
      ["?project_id=prj_" + "0".repeat(24), "must be an autopilot project id like apj_<24 hex digits>"],
    ];
    for (const [query, says] of malformed) {
      const res = await listed(admin, query);
      expect(res.status, query).toBe(400);
      expect(res.body.error.code).toBe("invalid_request");
      expect(JSON.stringify(res.body.error), query).toContain(says);
      expect(res.body.runs).toBeUndefined();
    }
  });
});
