// GET /v1/runs as people look for runs: each listed run's title, repository, project, machine,
// start and end, and the filters by state, project, label and machine (docs/protocol.md, "Runs").

import { describe, expect, it } from "vitest";
import { admitReadyIssue, createProject, installRealAutopilotWithTracker } from "./autopilot-fakes";
import { finishRun } from "./events-helpers";
import { call, claim, createOrg, dispatch, registerRunner } from "./helpers";

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
