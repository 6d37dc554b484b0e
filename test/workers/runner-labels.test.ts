// `docket-runner listen --label` (runner-cli/README.md, "Configuration"): the heartbeat's labels
// replace the machine's, and claims are matched against the new ones.

import { describe, expect, it } from "vitest";
import { call, claim, CLI_VERSION, createOrg, dispatch, getRun, parseCost, registerRunner } from "./helpers";

describe("labels sent with a heartbeat", () => {
  it("replace the machine's labels: a run needing the new label is handed to it", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin, { labels: ["linux"] });
    const runId = await dispatch(admin, { labels: ["gpu"] });
    expect((await claim(runner.token, 0)).status).toBe(204);
    const hb = await call("POST", "/v1/runners/heartbeat", {
      token: runner.token,
      body: { cli_version: CLI_VERSION, protocols: ["process"], labels: ["linux", "gpu"] },
    });
    expect(hb.status).toBe(200);
    const runners = (await call("GET", "/v1/runners", { token: admin })).body.runners;
    // The same machine, not a new registration: one runner, its id unchanged.
    expect(runners).toHaveLength(1);
    expect(runners[0]).toMatchObject({ id: runner.machineId, labels: ["gpu", "linux"] });
    expect(hb.body.machine_id).toBe(runner.machineId);
    const granted = await claim(runner.token, 0);
    expect(granted.status).toBe(200);
    expect(granted.body.run_id).toBe(runId);
    expect((await getRun(admin, runId)).state).toBe("claimed");
  });

  it("a heartbeat without labels keeps them, and bad labels are 400 and change nothing", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin, { labels: ["linux"] });
    await call("POST", "/v1/runners/heartbeat", { token: runner.token, body: { cli_version: CLI_VERSION, protocols: ["process"] } });
    const bad = await call("POST", "/v1/runners/heartbeat", {
      token: runner.token,
      body: { cli_version: CLI_VERSION, protocols: ["process"], labels: ["no spaces"] },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("invalid_request");
    expect((await call("GET", "/v1/runners", { token: admin })).body.runners[0].labels).toEqual(["linux"]);
  });

  it("the same labels again write nothing more and leave the scheduler alone; changed ones tell it", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin, { labels: ["linux"] });
    const beat = async (labels: string[]) => {
      const res = await call("POST", "/v1/runners/heartbeat", { token: runner.token, body: { cli_version: CLI_VERSION, protocols: ["process"], labels } });
      expect(res.status).toBe(200);
      return parseCost(res.headers.get("Docket-Cost"));
    };
    // The machine's last-seen row is written; the labels it already has (in any order) are not, and no scheduler is asked.
    expect(await beat(["linux"])).toMatchObject({ d1_rows_written: 1, do_requests: 0 });
    expect(await beat(["gpu", "linux"])).toMatchObject({ d1_rows_written: 2, do_requests: 1 });
    expect(await beat(["linux", "gpu"])).toMatchObject({ d1_rows_written: 1, do_requests: 0 });
    expect((await call("GET", "/v1/runners", { token: admin })).body.runners[0].labels).toEqual(["gpu", "linux"]);
    // The scheduler was told once: a run needing "gpu" is handed to the machine.
    const runId = await dispatch(admin, { labels: ["gpu"] });
    expect((await claim(runner.token, 0)).body.run_id).toBe(runId);
  });
});
