// The D1 queue row is a projection of the run object, written only with a newer version and
// repaired from the object's alarm (../shared/DESIGN.md, "D1 holds the queue and the credit ledger").

import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { DEFAULTS } from "../../src/config";
import { call, claim, createOrg, dispatch, registerRunner, runAlarm, runStub } from "./helpers";

const row = (runId: string) =>
  env.DB.prepare("SELECT state, version FROM runs WHERE id = ?").bind(runId).first<{ state: string; version: number }>();

describe("the queue projection", () => {
  it("a lost projection write is repaired by the run object's alarm", async () => {
    const { admin } = await createOrg();
    const runId = await dispatch(admin);
    await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: {} });
    // As if the D1 write after the cancel had failed: the row is behind, and the object knows it.
    await env.DB.prepare("UPDATE runs SET state = 'queued', version = 1 WHERE id = ?").bind(runId).run();
    // After a failed write the object arms its alarm to retry (RunObject.armAlarm).
    await runInDurableObject(runStub(runId), async (_o, state) => {
      state.storage.sql.exec("UPDATE run SET projected_version = 1");
      await state.storage.setAlarm(Date.now() + 60_000);
    });
    expect((await row(runId))?.state).toBe("queued");
    expect(await runAlarm(runId)).toBe(true);
    expect(await row(runId)).toEqual({ state: "cancelled", version: 2 });
  });

  it("a claim whose queue row write fails records it as not made, and its alarm writes it", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    await env.DB.prepare("CREATE TRIGGER refuse_claimed BEFORE UPDATE ON runs WHEN NEW.state = 'claimed' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END").run();
    try {
      const grant = await claim(runner.token, 0);
      expect(grant.status).toBe(200);
    } finally {
      await env.DB.prepare("DROP TRIGGER refuse_claimed").run();
    }
    expect(await row(runId)).toEqual({ state: "queued", version: 1 });
    const stored = await runInDurableObject(runStub(runId), async (_o, state) => ({
      projected: state.storage.sql.exec<{ v: number }>("SELECT projected_version AS v FROM run").one().v,
      alarm: await state.storage.getAlarm(),
    }));
    // The claim's commit had recorded the row as written; the failure took that back and armed a retry.
    expect(stored.projected).toBe(1);
    expect(stored.alarm!).toBeLessThan(Date.now() + DEFAULTS.launchDeadlineMs / 2);
    expect(await runAlarm(runId)).toBe(true);
    expect(await row(runId)).toEqual({ state: "claimed", version: 2 });
  });

  it("an older version never overwrites a newer row", async () => {
    const { admin } = await createOrg();
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    await claim(runner.token, 0);
    const { projectRun } = await import("../../src/run/projection");
    const current = await runInDurableObject(runStub(runId), (_o, state) =>
      JSON.parse(state.storage.sql.exec<{ doc: string }>("SELECT doc FROM run").one().doc),
    );
    await projectRun(env.DB, { ...current, state: "queued", version: 1 });
    expect(await row(runId)).toEqual({ state: "claimed", version: 2 });
  });
});
