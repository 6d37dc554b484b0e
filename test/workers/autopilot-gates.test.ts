// Scheduler gates per autopilot project (../shared/spec/run-lifecycle.md, "Queue and dispatch" and
// "Pause and continuation"; docs/protocol.md, "Autopilot scheduler"): enabled, drain, dispatch
// window, concurrency and model-spend budget, checked in the claim step; slots released when a run
// stops executing; ordering; and the scheduler's state through the API. Each test has its own
// organization, so its own SchedulerObject.

import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { handleDelivery, type AutopilotMessage } from "../../src/autopilot/queue";
import { windowOpen, type DispatchWindow } from "../../src/autopilot/scheduler-gates";
import { loadConfig } from "../../src/config";
import { dispatchRun } from "../../src/run/dispatch";
import { deliverEvents, expectLedgerIdentity, finalReport, grantCredit, runEvents } from "./builds-helpers";
import { briefBody, createProject, example, installRealAutopilotWithTracker } from "./autopilot-fakes";
import { attemptCall, call, claim, createOrg, getRun, registerRunner, report, runStub, setSchedulerConfig, untilClaimWaits } from "./helpers";

type Json = Record<string, any>;

const config = loadConfig(env as unknown as Record<string, unknown>);
const fake = installRealAutopilotWithTracker();
let nextOrg = 0;

/** A fresh organization with one autopilot project and one registered runner. */
async function setup() {
  const org = await createOrg(`gates-${++nextOrg}`);
  const project = await createProject(org.admin);
  const runner = await registerRunner(org.admin);
  return { ...org, projectId: project.id, project, runner };
}

/** A run as autopilot admission creates it (its project set through dispatchRun), or a plain run. */
async function queueRun(orgId: string, projectId: string | null, overrides: Json = {}): Promise<string> {
  const body = { brief: "fix the bug", launch: { command: ["node", "agent.mjs"] }, ...overrides };
  const { run } = await dispatchRun(env, orgId, body, null, projectId ? { projectId } : {});
  return run.id;
}

async function scheduler(token: string, projectId: string): Promise<Json> {
  const res = await call("GET", `/v1/autopilot/projects/${projectId}/scheduler`, { token });
  expect(res.status).toBe(200);
  return res.body;
}

async function command(admin: string, projectId: string, what: "enable" | "disable" | "drain"): Promise<Json> {
  const res = await call("POST", `/v1/autopilot/projects/${projectId}/scheduler/${what}`, { token: admin });
  expect(res.status).toBe(200);
  return res.body;
}

async function patch(admin: string, projectId: string, body: Json): Promise<Json> {
  const res = await call("PATCH", `/v1/autopilot/projects/${projectId}/scheduler`, { token: admin, body });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

/** A claim answered at once: the run id handed out, or null (204). */
async function claimedRun(machineToken: string): Promise<{ runId: string | null; body: Json }> {
  const res = await claim(machineToken, 0);
  expect([200, 204]).toContain(res.status);
  return { runId: res.status === 200 ? res.body.run_id : null, body: res.body };
}

/** Claims and launches: the run is implementing and holds its slot. */
async function start(machineToken: string, expected: string): Promise<Json> {
  const { runId, body } = await claimedRun(machineToken);
  expect(runId).toBe(expected);
  expect((await attemptCall(machineToken, expected, body.attempt, "launched", { sandbox_id: "sbx-1" })).status).toBe(200);
  return body;
}

/** The daemon's checkpoint of a pausing attempt: the only way its run becomes paused with its work kept. */
async function checkpoint(grant: Json): Promise<void> {
  const res = await call("POST", `/v1/runs/${grant.run_id}/attempts/${grant.attempt}/checkpoint`, {
    token: grant.attempt_token,
    body: { session_id: "session-1", session: { turn: 1 }, patch: "" },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
}

function gate(view: Json, name: string): Json {
  return view.verdicts.find((v: Json) => v.gate === name);
}

/** "HH:MM" in UTC, `minutes` from now. */
function utcAt(minutes: number): string {
  const d = new Date(Date.now() + minutes * 60_000);
  return `${String(d.getUTCHours()).padStart(2, "0")}:${String(d.getUTCMinutes()).padStart(2, "0")}`;
}

const ALL_DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

describe("the run knows its project", () => {
  it("an admitted run carries project_id in its view and its queue row; a dispatched run has none", async () => {
    const s = await setup();
    const gated = await queueRun(s.orgId, s.projectId);
    const plain = await queueRun(s.orgId, null);
    expect((await getRun(s.admin, gated)).project_id).toBe(s.projectId);
    expect((await getRun(s.admin, plain)).project_id).toBeNull();
    const row = await env.DB.prepare("SELECT project_id FROM runs WHERE id = ?").bind(gated).first<{ project_id: string }>();
    expect(row?.project_id).toBe(s.projectId);
  });
});

describe("enabled and disabled", () => {
  it("a disabled project's run is never handed out while other work is; enabled again it is", async () => {
    const s = await setup();
    const disabled = await command(s.admin, s.projectId, "disable");
    expect(disabled.scheduler).toMatchObject({ enabled: false, admission: { open: false, reason: "scheduler disabled" } });
    const gated = await queueRun(s.orgId, s.projectId, { priority: 100 });
    const plain = await queueRun(s.orgId, null);
    expect((await claimedRun(s.runner.token)).runId).toBe(plain);
    expect((await claimedRun(s.runner.token)).runId).toBeNull();
    expect((await getRun(s.admin, gated)).state).toBe("queued");
    expect(gate(await scheduler(s.admin, s.projectId), "enabled")).toEqual({ gate: "enabled", open: false, reason: "scheduler disabled" });

    const enabled = await command(s.admin, s.projectId, "enable");
    expect(enabled.scheduler).toMatchObject({ enabled: true, admission: { open: true, reason: null } });
    expect((await claimedRun(s.runner.token)).runId).toBe(gated);
  });

  it("a disabled project's queued run says the scheduler holds it, in its answer and in the queue", async () => {
    const s = await setup();
    await command(s.admin, s.projectId, "disable");
    const gated = await queueRun(s.orgId, s.projectId);
    const expected = { reason: "scheduler_gate", detail: { gate: "enabled", message: "its project's scheduler holds it: scheduler disabled" } };
    expect((await getRun(s.admin, gated)).waiting).toEqual(expected);
    const queue = await call("GET", "/v1/queue", { token: s.admin });
    expect(queue.body.runs.find((r: Json) => r.id === gated).waiting).toEqual(expected);
    await command(s.admin, s.projectId, "enable");
    expect((await getRun(s.admin, gated)).waiting.reason).not.toBe("scheduler_gate");
  });

  it("a disabled project's queued runs, more than a claim reads, never starve another project's work", async () => {
    const s = await setup();
    await command(s.admin, s.projectId, "disable");
    for (let i = 0; i < config.claimCandidatesMax + 2; i++) await queueRun(s.orgId, s.projectId, { priority: 50 });
    const plain = await queueRun(s.orgId, null);
    expect((await claimedRun(s.runner.token)).runId).toBe(plain);
  });

  it("disable asks executing runs to pause without a hold; enable queues paused runs again but never one an operator holds", async () => {
    const s = await setup();
    await patch(s.admin, s.projectId, { concurrency: 3 });
    const a = await queueRun(s.orgId, s.projectId);
    const b = await queueRun(s.orgId, s.projectId);
    const held = await queueRun(s.orgId, s.projectId);
    const grants = [await start(s.runner.token, a), await start(s.runner.token, b)];
    // An operator's Stop at checkpoint on a run still queued: paused with a hold.
    expect(await runStub(held).control(s.orgId, { type: "pause", hold: true, reason: "operator stop" })).toMatchObject({ state: "paused", hold: true });

    const disabled = await command(s.admin, s.projectId, "disable");
    expect(disabled.paused.sort()).toEqual([a, b].sort());
    for (const id of [a, b]) expect(await getRun(s.admin, id)).toMatchObject({ state: "pausing", hold: false });
    // Pausing still executes: the slots stay held until execution settles.
    expect((await scheduler(s.admin, s.projectId)).concurrency.in_use).toBe(2);
    for (const grant of grants) await checkpoint(grant);
    expect((await scheduler(s.admin, s.projectId)).concurrency.in_use).toBe(0);

    const enabled = await command(s.admin, s.projectId, "enable");
    expect(enabled.resumed.sort()).toEqual([a, b].sort());
    expect(enabled.skipped).toEqual([{ run_id: held, reason: expect.stringContaining("held by an operator") }]);
    expect(await getRun(s.admin, held)).toMatchObject({ state: "paused", hold: true });
    for (const id of [a, b]) expect(await getRun(s.admin, id)).toMatchObject({ state: "queued", continuation: "implementing" });
  });
});

describe("enable and a claim already waiting", () => {
  it("hands the waiting claim the paused run's continuation, not the new work queued meanwhile", async () => {
    const s = await setup();
    await patch(s.admin, s.projectId, { concurrency: 1 });
    const paused = await queueRun(s.orgId, s.projectId);
    const grant = await start(s.runner.token, paused);
    await command(s.admin, s.projectId, "disable");
    await checkpoint(grant);
    const fresh = await queueRun(s.orgId, s.projectId);

    // The claim waits through the enable, however slow (the tests' CLAIM_WAIT_MS is 1 s).
    await setSchedulerConfig(s.orgId, { claimWaitMs: 60_000 });
    const waiting = claim(s.runner.token, 60_000);
    await untilClaimWaits(s.orgId);
    const enabled = await command(s.admin, s.projectId, "enable");
    expect(enabled.resumed).toEqual([paused]);
    const answer = await waiting;
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ run_id: paused, checkpoint: { attempt: 1 } });
    expect(await getRun(s.admin, fresh)).toMatchObject({ state: "queued", attempt: 0 });
  });
});

describe("drain", () => {
  it("running work finishes and nothing new starts", async () => {
    const s = await setup();
    const running = await queueRun(s.orgId, s.projectId);
    const waiting = await queueRun(s.orgId, s.projectId);
    const grant = await start(s.runner.token, running);
    const drained = await command(s.admin, s.projectId, "drain");
    expect(drained.scheduler).toMatchObject({ enabled: true, draining: true, admission: { open: false, reason: "draining" } });
    expect(drained.paused).toEqual([]);
    expect((await claimedRun(s.runner.token)).runId).toBeNull();
    expect((await report(grant.attempt_token, running, { final: finalReport(10) })).status).toBe(200);
    expect((await getRun(s.admin, running)).state).toBe("completed");
    expect((await claimedRun(s.runner.token)).runId).toBeNull();
    expect((await getRun(s.admin, waiting)).state).toBe("queued");
    expect(gate(await scheduler(s.admin, s.projectId), "drain")).toMatchObject({ open: false });
    await command(s.admin, s.projectId, "enable");
    expect((await claimedRun(s.runner.token)).runId).toBe(waiting);
  });
});

describe("dispatch window", () => {
  it("a run is handed out only inside the window", async () => {
    const s = await setup();
    const closed = await patch(s.admin, s.projectId, { window: { days: ALL_DAYS, start: utcAt(120), end: utcAt(180), time_zone: "UTC" } });
    expect(gate(closed, "window")).toMatchObject({ open: false, reason: expect.stringContaining("outside the dispatch window") });
    const run = await queueRun(s.orgId, s.projectId);
    expect((await claimedRun(s.runner.token)).runId).toBeNull();
    const open = await patch(s.admin, s.projectId, { window: { days: ALL_DAYS, start: utcAt(-60), end: utcAt(60), time_zone: "UTC" } });
    expect(gate(open, "window")).toMatchObject({ open: true });
    expect(open.window).toMatchObject({ time_zone: "UTC" });
    expect((await claimedRun(s.runner.token)).runId).toBe(run);
  });

  // 2026-03-04 is a Wednesday. Asia/Tokyo has no DST (UTC+9 all year).
  const at = (iso: string) => Date.parse(iso);
  const tokyo: DispatchWindow = { days: ["wed"], start: "09:00", end: "17:00", timeZone: "Asia/Tokyo" };
  const overnight: DispatchWindow = { days: ["fri"], start: "22:00", end: "06:00", timeZone: "UTC" };

  it("a DST-free window is evaluated in its own time zone", () => {
    expect(windowOpen(tokyo, at("2026-03-04T00:00:00Z"))).toBe(true); // 09:00 Wednesday in Tokyo
    expect(windowOpen(tokyo, at("2026-03-03T23:59:00Z"))).toBe(false); // 08:59 in Tokyo
    expect(windowOpen(tokyo, at("2026-03-04T08:00:00Z"))).toBe(false); // 17:00 in Tokyo: end is exclusive
    expect(windowOpen(tokyo, at("2026-03-05T01:00:00Z"))).toBe(false); // 10:00 Thursday in Tokyo
  });

  it("an overnight window runs from its listed day past midnight into the next", () => {
    expect(windowOpen(overnight, at("2026-03-06T23:00:00Z"))).toBe(true); // Friday 23:00
    expect(windowOpen(overnight, at("2026-03-07T05:59:00Z"))).toBe(true); // Saturday 05:59
    expect(windowOpen(overnight, at("2026-03-07T06:00:00Z"))).toBe(false); // Saturday 06:00
    expect(windowOpen(overnight, at("2026-03-07T23:00:00Z"))).toBe(false); // Saturday night is not listed
    expect(windowOpen(overnight, at("2026-03-06T05:00:00Z"))).toBe(false); // Friday early: Thursday is not listed
  });

  it("a zone with DST keeps local hours across the change", () => {
    const ny: DispatchWindow = { days: ["mon"], start: "09:00", end: "10:00", timeZone: "America/New_York" };
    expect(windowOpen(ny, at("2026-03-02T14:30:00Z"))).toBe(true); // EST: 09:30 local
    expect(windowOpen(ny, at("2026-03-09T14:30:00Z"))).toBe(false); // EDT: 10:30 local
    expect(windowOpen(ny, at("2026-03-09T13:30:00Z"))).toBe(true); // EDT: 09:30 local
  });
});

describe("concurrency", () => {
  it("N slots hold at N under many concurrent claims, and the scheduler names their runs", async () => {
    const s = await setup();
    await patch(s.admin, s.projectId, { concurrency: 2 });
    for (let i = 0; i < 6; i++) await queueRun(s.orgId, s.projectId);
    const runners = await Promise.all(Array.from({ length: 6 }, (_, i) => registerRunner(s.admin, { name: `box-${i}` })));
    const answers = await Promise.all(runners.map((r) => claim(r.token, 0)));
    const granted = answers.filter((a) => a.status === 200).map((a) => a.body.run_id as string);
    expect(granted).toHaveLength(2);
    const view = await scheduler(s.admin, s.projectId);
    expect(view.concurrency).toMatchObject({ limit: 2, configured: 2, in_use: 2 });
    expect(view.concurrency.slots.map((x: Json) => x.run_id).sort()).toEqual(granted.sort());
    expect(gate(view, "concurrency")).toEqual({ gate: "concurrency", open: false, reason: "all 2 slots in use" });
  });

  it("a paused run and a blocked run give their slot back once execution stopped", async () => {
    const s = await setup();
    await patch(s.admin, s.projectId, { concurrency: 1 });
    const a = await queueRun(s.orgId, s.projectId);
    const b = await queueRun(s.orgId, s.projectId);
    const c = await queueRun(s.orgId, s.projectId);
    const grantA = await start(s.runner.token, a);
    await runStub(a).control(s.orgId, { type: "pause", hold: false, reason: "test pause" });
    expect((await claimedRun(s.runner.token)).runId).toBeNull(); // pausing still holds the slot
    await checkpoint(grantA);
    await start(s.runner.token, b);
    expect(await runStub(b).control(s.orgId, { type: "block", blocker: { summary: "needs a human", evidence: [], questions: [], humanAction: "answer on the issue" } })).toMatchObject({ state: "blocked" });
    expect((await claimedRun(s.runner.token)).runId).toBe(c);
    expect((await scheduler(s.admin, s.projectId)).concurrency.slots.map((x: Json) => x.run_id)).toEqual([c]);
    // A scheduler resume re-queues the paused run but never clears a tracker blocker.
    const enabled = await command(s.admin, s.projectId, "enable");
    expect(enabled.resumed).toEqual([a]);
    expect((await getRun(s.admin, b)).state).toBe("blocked");
  });

  it("the backstop releases a slot whose run stopped executing when the release call was lost", async () => {
    const s = await setup();
    const a = await queueRun(s.orgId, s.projectId);
    const grant = await start(s.runner.token, a);
    expect((await report(grant.attempt_token, a, { final: finalReport(null) })).status).toBe(200);
    const stub = env.SCHEDULER.get(env.SCHEDULER.idFromName(s.orgId));
    // As if the run object's release call had never arrived: the slot is back in the table.
    await runInDurableObject(stub, (_o, state) => {
      state.storage.sql.exec("INSERT OR IGNORE INTO slots (run_id, attempt, project_id, org_id, taken_at_ms, checked_at_ms) VALUES (?, 1, ?, ?, 0, 0)", a, s.projectId, s.orgId);
    });
    expect((await scheduler(s.admin, s.projectId)).concurrency.in_use).toBe(1);
    expect(await stub.checkSlots()).toMatchObject({ released: [a] });
    expect((await scheduler(s.admin, s.projectId)).concurrency.in_use).toBe(0);
  });
});

describe("the slot backstop and disable", () => {
  it("a run claimed but not launched at the disable is skipped, and the backstop asks it to pause once it executes", async () => {
    const s = await setup();
    const a = await queueRun(s.orgId, s.projectId);
    const grant = (await claimedRun(s.runner.token)).body;
    expect(grant.run_id).toBe(a);
    const disabled = await command(s.admin, s.projectId, "disable");
    expect(disabled.paused).toEqual([]);
    expect(disabled.skipped).toEqual([{ run_id: a, reason: expect.stringContaining("cannot be paused") }]);
    expect((await attemptCall(s.runner.token, a, grant.attempt, "launched", { sandbox_id: "sbx-1" })).status).toBe(200);
    expect((await getRun(s.admin, a)).state).toBe("implementing");
    const stub = env.SCHEDULER.get(env.SCHEDULER.idFromName(s.orgId));
    expect(await stub.checkSlots()).toMatchObject({ checked: 1, released: [] });
    expect(await getRun(s.admin, a)).toMatchObject({ state: "pausing", hold: false });
  });
});

describe("ordering", () => {
  it("a resumption beats a higher-priority new run", async () => {
    const s = await setup();
    const resumed = await queueRun(s.orgId, s.projectId, { priority: 0 });
    const grant = await start(s.runner.token, resumed);
    await runStub(resumed).control(s.orgId, { type: "pause", hold: false, reason: "test pause" });
    await checkpoint(grant);
    const urgent = await queueRun(s.orgId, s.projectId, { priority: 100 });
    await runStub(resumed).control(s.orgId, { type: "resume", by: "scheduler" });
    expect((await claimedRun(s.runner.token)).runId).toBe(resumed);
    expect((await claimedRun(s.runner.token)).runId).toBe(urgent);
  });
});

describe("model-spend budget", () => {
  it("reserves from the ledger at dispatch, refuses when the project's limit is short, and settles once", async () => {
    const s = await setup();
    await grantCredit(s.admin, 10_000);
    await patch(s.admin, s.projectId, { concurrency: 5, budget: { limit_cents: 500, per_run_cents: 200 } });
    const a = await queueRun(s.orgId, s.projectId);
    const b = await queueRun(s.orgId, s.projectId);
    const c = await queueRun(s.orgId, s.projectId);
    const grantA = await start(s.runner.token, a);
    await start(s.runner.token, b);
    expect((await claimedRun(s.runner.token)).runId).toBeNull();
    let view = await scheduler(s.admin, s.projectId);
    expect(view.budget).toMatchObject({ limit_cents: 500, per_run_cents: 200, held_cents: 400, spent_cents: 0, left_cents: 100 });
    expect(gate(view, "budget")).toMatchObject({ open: false, reason: expect.stringContaining("budget exhausted") });
    expect(await expectLedgerIdentity(s.admin)).toMatchObject({ held_cents: 400, available_cents: 9_600 });

    expect((await report(grantA.attempt_token, a, { final: finalReport(50) })).status).toBe(200);
    view = await vi.waitFor(
      async () => {
        const v = await scheduler(s.admin, s.projectId);
        if (v.budget.spent_cents !== 50) throw new Error("not settled yet");
        return v;
      },
      { timeout: 20_000, interval: 50 },
    );
    expect(view.budget).toMatchObject({ held_cents: 200, spent_cents: 50, left_cents: 250 });
    expect(await expectLedgerIdentity(s.admin)).toMatchObject({ held_cents: 200, spent_cents: 50 });
    // The run's events delivered again settle nothing twice.
    await deliverEvents(await runEvents(s.admin, a, s.orgId));
    expect((await scheduler(s.admin, s.projectId)).budget).toMatchObject({ held_cents: 200, spent_cents: 50 });
    expect(await expectLedgerIdentity(s.admin)).toMatchObject({ held_cents: 200, spent_cents: 50 });
    const entries = await call("GET", "/v1/credits?limit=100", { token: s.admin });
    expect(entries.body.entries.filter((e: Json) => e.run_id === a).map((e: Json) => [e.kind, e.amount_cents]).sort()).toEqual([
      ["release", 150],
      ["reserve", 200],
      ["settle", 50],
    ]);
    expect((await claimedRun(s.runner.token)).runId).toBe(c);

    // A reset is explicit: the spent count starts again at zero, held reservations stay.
    const reset = await patch(s.admin, s.projectId, { reset_budget: true });
    expect(reset.budget).toMatchObject({ held_cents: 400, spent_cents: 0, left_cents: 100 });
  });

  it("a run handed out again after a pause keeps its one reservation", async () => {
    const s = await setup();
    await grantCredit(s.admin, 1_000);
    await patch(s.admin, s.projectId, { budget: { limit_cents: 100, per_run_cents: 60 } });
    const a = await queueRun(s.orgId, s.projectId);
    const grant = await start(s.runner.token, a);
    await runStub(a).control(s.orgId, { type: "pause", hold: false, reason: "test pause" });
    await checkpoint(grant);
    await runStub(a).control(s.orgId, { type: "resume", by: "scheduler" });
    // 40 cents left would refuse a new reservation; the continuation already holds its own.
    expect((await claimedRun(s.runner.token)).runId).toBe(a);
    expect((await scheduler(s.admin, s.projectId)).budget).toMatchObject({ held_cents: 60, left_cents: 40 });
    expect(await expectLedgerIdentity(s.admin)).toMatchObject({ held_cents: 60 });
  });

  it("refuses when the organization's credit is short, and the claim moves on to other work", async () => {
    const s = await setup();
    await grantCredit(s.admin, 100);
    await patch(s.admin, s.projectId, { budget: { limit_cents: 10_000, per_run_cents: 200 } });
    const gated = await queueRun(s.orgId, s.projectId, { priority: 100 });
    const plain = await queueRun(s.orgId, null);
    expect((await claimedRun(s.runner.token)).runId).toBe(plain);
    const waiting = await getRun(s.admin, gated);
    expect(waiting.state).toBe("queued");
    // Why it waits is said where an operator looks: the run's waiting and the scheduler's budget verdict.
    expect(waiting.waiting).toMatchObject({ reason: "scheduler_gate", detail: { gate: "budget" } });
    expect(waiting.waiting.detail.message).toContain("the organization's available credit is short of the per-run reservation (200 cents)");
    const view = await scheduler(s.admin, s.projectId);
    expect(view.verdicts.find((v: Json) => v.gate === "budget")).toMatchObject({ open: false, reason: expect.stringContaining("available credit is short") });
    expect(view.concurrency.in_use).toBe(0);
    expect(view.budget).toMatchObject({ held_cents: 0 });
    expect(await expectLedgerIdentity(s.admin)).toMatchObject({ held_cents: 0, available_cents: 100 });
    await grantCredit(s.admin, 1_000);
    expect((await claimedRun(s.runner.token)).runId).toBe(gated);
    expect(await expectLedgerIdentity(s.admin)).toMatchObject({ held_cents: 200 });
  });

  it("a cost above the hold goes to cost review and stays held", async () => {
    const s = await setup();
    await grantCredit(s.admin, 1_000);
    await patch(s.admin, s.projectId, { budget: { limit_cents: 1_000, per_run_cents: 100 } });
    const a = await queueRun(s.orgId, s.projectId);
    const grant = await start(s.runner.token, a);
    expect((await report(grant.attempt_token, a, { final: finalReport(300) })).status).toBe(200);
    await vi.waitFor(
      async () => {
        const row = await env.DB.prepare("SELECT status FROM run_reservations WHERE run_id = ?").bind(a).first<{ status: string }>();
        if (row?.status !== "cost_review") throw new Error(`reservation ${row?.status}`);
      },
      { timeout: 20_000, interval: 50 },
    );
    expect((await scheduler(s.admin, s.projectId)).budget).toMatchObject({ held_cents: 100, spent_cents: 0 });
    expect(await expectLedgerIdentity(s.admin)).toMatchObject({ held_cents: 100, spent_cents: 0 });
  });
});

describe("admission", () => {
  let issueNumber = 900;

  async function admit(projectId: string, tracker: ReturnType<typeof fake.tracker>) {
    const payload = example("issues", "labeled");
    payload.issue.number = issueNumber++;
    payload.issue.body = briefBody(payload.issue.body);
    tracker.fromPayload(payload);
    const message: AutopilotMessage = {
      kind: "autopilot.delivery",
      project_id: projectId,
      number: payload.issue.number,
      delivery_id: crypto.randomUUID(),
      event: "issues",
      action: "labeled",
      sender: { login: payload.sender.login, type: payload.sender.type, viaApp: null },
    };
    return handleDelivery(env, config, fake.deps, message);
  }

  it("refuses with a visible reason while the scheduler is disabled or draining, and admits once enabled", async () => {
    const s = await setup();
    const tracker = fake.tracker(s.projectId);
    await command(s.admin, s.projectId, "disable");
    expect(await admit(s.projectId, tracker)).toMatchObject({ outcome: "refused", reasons: ["scheduler disabled"], runId: null });
    await command(s.admin, s.projectId, "enable");
    await command(s.admin, s.projectId, "drain");
    expect(await admit(s.projectId, tracker)).toMatchObject({ outcome: "refused", reasons: ["draining"], runId: null });
    await command(s.admin, s.projectId, "enable");
    const admitted = await admit(s.projectId, tracker);
    expect(admitted).toMatchObject({ outcome: "admitted" });
    expect((await getRun(s.admin, admitted!.runId!)).project_id).toBe(s.projectId);
  });
});

describe("the scheduler API", () => {
  it("a member reads the scheduler with every gate's verdict; only an admin changes it", async () => {
    const s = await setup();
    const member = (await call("POST", "/v1/tokens", { token: s.admin, body: { kind: "member", role: "member" } })).body.token;
    const view = await scheduler(member, s.projectId);
    expect(view).toMatchObject({
      project_id: s.projectId,
      enabled: true,
      draining: false,
      window: null,
      budget: null,
      concurrency: { limit: config.autopilotSchedulerConcurrencyDefault, configured: null, in_use: 0, slots: [] },
    });
    expect(view.verdicts.map((v: Json) => v.gate)).toEqual(["enabled", "drain", "window", "concurrency", "budget"]);
    expect(view.verdicts.every((v: Json) => v.open)).toBe(true);
    for (const [method, path] of [
      ["POST", "scheduler/disable"],
      ["POST", "scheduler/enable"],
      ["POST", "scheduler/drain"],
      ["PATCH", "scheduler"],
    ]) {
      const res = await call(method, `/v1/autopilot/projects/${s.projectId}/${path}`, { token: member, body: method === "PATCH" ? { concurrency: 1 } : undefined });
      expect(res.status).toBe(403);
    }
    expect((await scheduler(s.admin, s.projectId)).enabled).toBe(true);
  });

  it("bad input is invalid_request naming the field and changes nothing; another organization's project is not_found", async () => {
    const s = await setup();
    const bad: [Json, string][] = [
      [{ window: { days: ["mon"], start: "25:00", end: "06:00", time_zone: "UTC" } }, "window.start"],
      [{ window: { days: ["mon"], start: "09:00", end: "09:00", time_zone: "UTC" } }, "window.end"],
      [{ window: { days: ["mon"], start: "09:00", end: "17:00", time_zone: "Mars/Olympus" } }, "window.time_zone"],
      [{ window: { days: [], start: "09:00", end: "17:00", time_zone: "UTC" } }, "window.days"],
      [{ concurrency: 0 }, "concurrency"],
      [{ concurrency: config.autopilotSchedulerConcurrencyMax + 1 }, "concurrency"],
      [{ budget: { limit_cents: 100, per_run_cents: 200 } }, "budget.per_run_cents"],
      [{}, "body"],
      [{ surprise: 1 }, "body"],
    ];
    for (const [body, field] of bad) {
      const res = await call("PATCH", `/v1/autopilot/projects/${s.projectId}/scheduler`, { token: s.admin, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error).toMatchObject({ code: "invalid_request", field });
    }
    expect(await scheduler(s.admin, s.projectId)).toMatchObject({ window: null, budget: null, concurrency: { configured: null } });
    const other = await createOrg(`gates-other-${nextOrg}`);
    const res = await call("GET", `/v1/autopilot/projects/${s.projectId}/scheduler`, { token: other.admin });
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe("not_found");
  });
});
