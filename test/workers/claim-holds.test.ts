// A claim's slot and reservation across refusals, lost answers and evictions (../shared/DESIGN.md,
// invariant 9: a run behind a budget gate executes only while it holds exactly one reservation; a
// slot is held by exactly one attempt). Each step of a claim is interrupted where an object can be
// evicted: the scheduler re-created over its storage after taking a slot, the run object's answer
// lost after it committed, the run object re-created between a slot taken and the claim.

import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { RunObject } from "../../durable-objects/run-object";
import { SchedulerObject, type ClaimRequest } from "../../durable-objects/scheduler-object";
import { loadConfig } from "../../src/config";
import type { Env } from "../../src/env";
import { sha256Hex } from "../../src/lib/crypto";
import { dispatchRun } from "../../src/run/dispatch";
import { auditLedgerAfterEachTest, expectLedgerIdentity, finalReport, grantCredit, newOrg } from "./builds-helpers";
import { createProject, installRealAutopilotWithTracker } from "./autopilot-fakes";
import { ageRun, attemptCall, call, claim, CLI_VERSION, getRun, registerRunner, report, runAlarm, runStub, schedulerOf } from "./helpers";

type Json = Record<string, any>;

installRealAutopilotWithTracker();
auditLedgerAfterEachTest();
const config = loadConfig(env as unknown as Record<string, unknown>);
let nextOrg = 0;

/** An organization with credit, one runner, and a project with `concurrency` slots and, when `perRunCents`, a budget. */
async function project(opts: { concurrency: number; perRunCents?: number }) {
  const org = await newOrg(`holds-${++nextOrg}`);
  const { id: projectId } = await createProject(org.admin);
  const runner = await registerRunner(org.admin);
  await grantCredit(org.admin, 1_000);
  const budget = opts.perRunCents ? { budget: { limit_cents: 10_000, per_run_cents: opts.perRunCents } } : {};
  const res = await call("PATCH", `/v1/autopilot/projects/${projectId}/scheduler`, { token: org.admin, body: { concurrency: opts.concurrency, ...budget } });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return { ...org, projectId, runner };
}

type Setup = Awaited<ReturnType<typeof project>>;

async function queueRun(s: Setup): Promise<string> {
  const { run } = await dispatchRun(env, s.orgId, { brief: "fix the bug", launch: { command: ["node", "agent.mjs"] } }, null, { projectId: s.projectId });
  return run.id;
}

async function scheduler(s: Setup): Promise<Json> {
  const res = await call("GET", `/v1/autopilot/projects/${s.projectId}/scheduler`, { token: s.admin });
  expect(res.status).toBe(200);
  return res.body;
}

const slots = async (s: Setup) => (await scheduler(s)).concurrency.slots.map((x: Json) => [x.run_id, x.attempt]);

/** The run's reservations in the ledger: [status, reserved_cents]. */
async function reservations(runId: string): Promise<[string, number][]> {
  const rows = await env.DB.prepare("SELECT status, reserved_cents FROM run_reservations WHERE run_id = ?").bind(runId).all<{ status: string; reserved_cents: number }>();
  return rows.results.map((r) => [r.status, r.reserved_cents]);
}

/** The run's ledger entries, [kind, amount], in ledger order. */
async function entries(runId: string): Promise<[string, number][]> {
  const rows = await env.DB.prepare("SELECT kind, amount_cents FROM ledger_entries WHERE run_id = ? ORDER BY seq").bind(runId).all<{ kind: string; amount_cents: number }>();
  return rows.results.map((r) => [r.kind, r.amount_cents]);
}

/** The claim the Worker would hand the scheduler for this runner. */
async function claimRequest(s: Setup): Promise<ClaimRequest> {
  return { orgId: s.orgId, tokenHash: await sha256Hex(s.runner.token), protocols: ["process"], offered: { cli_version: CLI_VERSION, protocols: ["process"] }, waitMs: 0 };
}

/**
 * A new instance of the organization's scheduler over its storage, as after an eviction, whose calls
 * to run objects go through `claimCounted` (the rest of the environment is the real one).
 */
function schedulerWith(state: DurableObjectState, claimCounted: (runId: string, machineId: string, attempt: number | null) => Promise<unknown>): SchedulerObject {
  const RUN = {
    idFromName: (name: string) => env.RUN.idFromName(name),
    get: (id: DurableObjectId) => {
      const real = env.RUN.get(id);
      return new Proxy(real, { get: (target, key) => (key === "claimCounted" ? (m: string, a: number | null) => claimCounted(realId(id), m, a) : Reflect.get(target, key)) });
    },
  };
  return new SchedulerObject(state, { ...env, RUN } as unknown as Env);
}

/** The run ids the test created, by their Durable Object id. */
const runIds = new Map<string, string>();
const realId = (id: DurableObjectId) => runIds.get(id.toString())!;
const remember = (runId: string) => runIds.set(env.RUN.idFromName(runId).toString(), runId);

/** Waits until the run's end has settled its reservation. */
async function settled(runId: string): Promise<void> {
  await vi.waitFor(
    async () => {
      const [[status]] = await reservations(runId);
      if (status === "held") throw new Error("the run's end is not settled yet");
    },
    { timeout: 20_000, interval: 50 },
  );
}

describe("a run never executes without the credit it holds", () => {
  it("a claim the run object refused, then claimed again, holds exactly one reservation, and the spend is charged at settlement", async () => {
    const s = await project({ concurrency: 2, perRunCents: 100 });
    const runId = await queueRun(s);
    // An operator's pause the queue row has not caught up with: the run object refuses the claim.
    expect(await runStub(runId).control(s.orgId, { type: "pause", hold: true, reason: "operator stop" })).toMatchObject({ state: "paused" });
    await env.DB.prepare("UPDATE runs SET state = 'queued' WHERE id = ?").bind(runId).run();
    expect((await claim(s.runner.token, 0)).status).toBe(204);
    expect(await reservations(runId)).toEqual([["released", 100]]);
    expect(await expectLedgerIdentity(s.admin)).toMatchObject({ held_cents: 0 });

    expect((await call("POST", `/v1/runs/${runId}/resume`, { token: s.admin, body: {} })).status).toBe(200);
    const grant = await claim(s.runner.token, 0);
    expect(grant.body).toMatchObject({ run_id: runId, attempt: 1 });
    // Executing: its one reservation is held again, under the balance check, and the budget counts it.
    expect(await reservations(runId)).toEqual([["held", 100]]);
    expect(await expectLedgerIdentity(s.admin)).toMatchObject({ held_cents: 100, available_cents: 900 });
    expect((await scheduler(s)).budget).toMatchObject({ held_cents: 100, spent_cents: 0 });

    expect((await attemptCall(s.runner.token, runId, 1, "launched", { sandbox_id: "sbx-1" })).status).toBe(200);
    expect((await report(grant.body.attempt_token, runId, { final: finalReport(40) })).status).toBe(200);
    await settled(runId);
    expect(await reservations(runId)).toEqual([["settled", 100]]);
    expect(await entries(runId)).toEqual([
      ["reserve", 100],
      ["release", 100],
      ["reserve", 100],
      ["settle", 40],
      ["release", 60],
    ]);
    expect(await expectLedgerIdentity(s.admin)).toMatchObject({ held_cents: 0, spent_cents: 40, available_cents: 960 });
    await vi.waitFor(async () => expect((await scheduler(s)).budget).toMatchObject({ held_cents: 0, spent_cents: 40 }), { timeout: 20_000, interval: 50 });
  });

  it("a claim whose answer was lost after the run object committed keeps the attempt's slot and the run's one reservation", async () => {
    const s = await project({ concurrency: 1, perRunCents: 100 });
    const runId = await queueRun(s);
    remember(runId);
    const req = await claimRequest(s);
    await runInDurableObject(schedulerOf(s.orgId), async (_o, state) => {
      const lossy = schedulerWith(state, async (id, machineId, attempt) => {
        await runStub(id).claimCounted(machineId, attempt);
        throw new Error("Network connection lost.");
      });
      await expect(lossy.claim(req)).rejects.toThrow("Network connection lost.");
    });
    // The attempt started: it holds the slot and the reservation, though its runner never heard.
    expect(await getRun(s.admin, runId)).toMatchObject({ state: "claimed", attempt: 1 });
    expect(await slots(s)).toEqual([[runId, 1]]);
    expect(await reservations(runId)).toEqual([["held", 100]]);
    expect(await expectLedgerIdentity(s.admin)).toMatchObject({ held_cents: 100 });

    // The attempt lapses at its launch deadline: its slot goes back, the reservation stays with the run.
    await ageRun(runId, config.launchDeadlineMs + 1_000);
    await runAlarm(runId);
    expect(await getRun(s.admin, runId)).toMatchObject({ state: "queued", attempt: 1 });
    expect(await slots(s)).toEqual([]);
    await ageRun(runId, config.backoffMaxMs + 1_000);
    expect((await claim(s.runner.token, 0)).body).toMatchObject({ run_id: runId, attempt: 2 });
    expect(await slots(s)).toEqual([[runId, 2]]);
    expect(await reservations(runId)).toEqual([["held", 100]]);
    expect(await entries(runId)).toEqual([["reserve", 100]]);
  });
});

describe("concurrency slots are exact", () => {
  it("a reset between taking a slot and asking the run object arms the backstop, which frees the slot of the attempt that never started", async () => {
    const s = await project({ concurrency: 1 });
    const runId = await queueRun(s);
    remember(runId);
    const req = await claimRequest(s);
    const alarm = await runInDurableObject(schedulerOf(s.orgId), async (_o, state) => {
      // The run object is never reached: the instance is reset while it asks.
      const asking = schedulerWith(state, () => new Promise(() => undefined));
      void asking.claim(req);
      await vi.waitFor(() => expect(state.storage.sql.exec("SELECT run_id, attempt FROM slots").toArray()).toEqual([{ run_id: runId, attempt: 1 }]));
      new SchedulerObject(state, env);
      return vi.waitFor(async () => {
        const at = await state.storage.getAlarm();
        if (at === null) throw new Error("no backstop armed");
        return at;
      });
    });
    expect(alarm).toBeLessThanOrEqual(Date.now() + config.autopilotSchedulerSlotCheckMs);
    // The project's one slot is taken by an attempt that never started: nothing is handed out yet.
    expect((await claim(s.runner.token, 0)).status).toBe(204);
    await runInDurableObject(schedulerOf(s.orgId), (_o, state) => {
      state.storage.sql.exec("UPDATE slots SET taken_at_ms = taken_at_ms - ?", config.autopilotSchedulerSlotCheckMs + 1);
    });
    expect(await runDurableObjectAlarm(schedulerOf(s.orgId))).toBe(true);
    expect(await slots(s)).toEqual([]);
    expect((await claim(s.runner.token, 0)).body).toMatchObject({ run_id: runId, attempt: 1 });
    expect(await slots(s)).toEqual([[runId, 1]]);
  });

  it("a release of an earlier attempt from a re-created run object never frees the slot taken for the next attempt", async () => {
    const s = await project({ concurrency: 1 });
    const runId = await queueRun(s);
    remember(runId);
    expect((await claim(s.runner.token, 0)).body).toMatchObject({ run_id: runId, attempt: 1 });
    expect((await attemptCall(s.runner.token, runId, 1, "launch-failed", { error: "image pull failed" })).status).toBe(200);
    expect(await slots(s)).toEqual([]);
    await ageRun(runId, config.backoffMaxMs + 1_000);

    const req = await claimRequest(s);
    const grant = await runInDurableObject(schedulerOf(s.orgId), async (_o, state) => {
      const racing = schedulerWith(state, async (id, machineId, attempt) => {
        // Between the slot taken for attempt 2 and the claim, the run object is evicted and a new
        // instance finishes what it finds pending: attempt 1 stopped executing.
        await runInDurableObject(runStub(id), (_r, runState) => new RunObject(runState, env).alarm());
        return runStub(id).claimCounted(machineId, attempt);
      });
      return racing.claim(req);
    });
    expect(grant.grant).toMatchObject({ run_id: runId, attempt: 2 });
    expect(await slots(s)).toEqual([[runId, 2]]);
    // Attempt 1's release arriving now frees nothing: the slot is attempt 2's.
    expect(await schedulerOf(s.orgId).releaseSlot(runId, 1)).toBe(false);
    expect(await slots(s)).toEqual([[runId, 2]]);
    // With concurrency 1 another run waits.
    const other = await queueRun(s);
    expect((await claim(s.runner.token, 0)).status).toBe(204);
    expect(await getRun(s.admin, other)).toMatchObject({ state: "queued" });
  });
});
