// The pre-claim recheck of autopilot runs (../shared/spec/run-lifecycle.md, "Queue and dispatch":
// "If eligibility changes while queued, do not start it. Record the reason and retain its
// history."). A claim asks the ticket that admitted a run whether it still backs it, from what the
// ticket recorded (never GitHub); a lapse recorded but not yet acted on (the withdrawal failed, or
// the Worker died between the two) never reaches a runner, and the ticket retries the withdrawal
// from its alarm. Admission is driven as in autopilot-admission.test.ts: the production project store and
// rules, with only GitHub stood in for by an in-memory tracker.

import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { handleDelivery, type AutopilotMessage } from "../../src/autopilot/queue";
import { ticketStub as projectTicket } from "../../src/autopilot/admission";
import { loadConfig } from "../../src/config";
import { call, claim, createOrg, dispatch, parseCost, registerRunner } from "./helpers";
import { briefBody, createProject, example, installRealAutopilotWithTracker, type FakeTracker, type RealProject } from "./autopilot-fakes";

const config = loadConfig(env as unknown as Record<string, unknown>);
const fake = installRealAutopilotWithTracker();
const LAPSE = 'eligibility lapsed: the issue does not carry the ready label "bug"';

let org: { orgId: string; admin: string };
let project: RealProject;
let tracker: FakeTracker;
let runner: { machineId: string; token: string };
let nextNumber = 700;

beforeAll(async () => {
  org = await createOrg("claim-recheck");
  project = await createProject(org.admin);
  tracker = fake.tracker(project.id);
  runner = await registerRunner(org.admin);
});

function ticketAt(number: number) {
  return { projectId: project.id, ticketKey: `github:${project.repository}#${number}` };
}

function ticketStub(number: number) {
  return projectTicket(env, ticketAt(number));
}

/** A user's issues.labeled on a fresh issue, admitted through the queue consumer: its run is queued. */
async function admitOne() {
  const payload = example("issues", "labeled");
  payload.issue.number = nextNumber++;
  payload.issue.body = briefBody(payload.issue.body);
  const issue = tracker.fromPayload(payload);
  const message: AutopilotMessage = {
    kind: "autopilot.delivery",
    project_id: project.id,
    number: payload.issue.number,
    delivery_id: crypto.randomUUID(),
    event: "issues",
    action: "labeled",
    sender: { login: payload.sender.login, type: payload.sender.type, viaApp: null },
  };
  const answer = await handleDelivery(env, config, fake.deps, message);
  expect(answer).toMatchObject({ outcome: "admitted" });
  return { number: payload.issue.number as number, issue, runId: answer!.runId! };
}

/**
 * What a crash leaves between the ticket recording a lapse and withdrawing the run (or a
 * withdrawal that failed): the lapse is in the ticket, the run still queued.
 */
async function recordLapseOnly(number: number, runId: string, opts: { attempts?: number; orgId?: string } = {}) {
  await runInDurableObject(ticketStub(number), (_o, state) => {
    state.storage.sql.exec(
      "UPDATE ticket SET withdraw_run_id = ?, withdraw_reason = ?, withdraw_attempts = ?, org_id = COALESCE(?, org_id), reasons = ?",
      runId,
      LAPSE,
      opts.attempts ?? 0,
      opts.orgId ?? null,
      JSON.stringify(['the issue does not carry the ready label "bug"']),
    );
    // The ticket arms its alarm with the record, before it tries the withdrawal.
    return state.storage.setAlarm(Date.now() + 60_000);
  });
}

async function runOf(runId: string) {
  const res = await call("GET", `/v1/runs/${runId}`, { token: org.admin });
  expect(res.status).toBe(200);
  return res.body;
}

async function eventsOf(runId: string) {
  const res = await call("GET", `/v1/runs/${runId}/events`, { token: org.admin });
  expect(res.status).toBe(200);
  return JSON.stringify(res.body.events);
}

describe("a claim asks the run's ticket first", () => {
  it("a lapse the ticket recorded but never acted on: no runner gets the run, which ends cancelled with the reason in its events", async () => {
    const { number, issue, runId } = await admitOne();
    issue.facts = { ...issue.facts, labels: [] }; // the person removed the label
    await recordLapseOnly(number, runId);
    expect((await runOf(runId)).state).toBe("queued");

    const res = await claim(runner.token);
    expect(res.status).toBe(204);
    const run = await runOf(runId);
    expect(run.state).toBe("cancelled");
    expect(run.stop_request.reason).toBe(LAPSE);
    expect(await eventsOf(runId)).toContain(JSON.stringify(LAPSE).slice(1, -1));
    // The ticket's alarm then completes the lapse in its own record and history.
    await runDurableObjectAlarm(ticketStub(number));
    const ticket = await ticketStub(number).read(ticketAt(number));
    expect(ticket).toMatchObject({ status: "lapsed", run_id: null, withdrawal: null });
    expect(ticket!.history[0]).toMatchObject({ kind: "lapsed", run_id: runId, door: "withdraw_retry" });
    const shown = await call("GET", `/v1/autopilot/projects/${project.id}/tickets/${number}`, { token: org.admin });
    expect(shown.status).toBe(200);
    expect(shown.body).toMatchObject({ status: "lapsed", run_id: null, withdrawal: null });
    expect(shown.body.history[0]).toMatchObject({ kind: "lapsed", door: "withdraw_retry", reasons: ['the issue does not carry the ready label "bug"'] });
  });

  it("the claim goes on to the next candidate: an eligible run queued behind the lapsed one is handed out", async () => {
    const lapsed = await admitOne();
    const eligible = await admitOne();
    await recordLapseOnly(lapsed.number, lapsed.runId);
    const res = await claim(runner.token);
    expect(res.status).toBe(200);
    expect(res.body.run_id).toBe(eligible.runId);
    expect((await runOf(lapsed.runId)).state).toBe("cancelled");
  });

  it("an eligible autopilot run is claimed normally, at one Durable Object request more than a run from the API", async () => {
    const { runId } = await admitOne();
    const ticketClaim = await claim(runner.token);
    expect(ticketClaim.status).toBe(200);
    expect(ticketClaim.body.run_id).toBe(runId);
    expect((await runOf(runId)).state).toBe("claimed");

    // A run from the API, even one whose metadata names a ticket, never asks a ticket.
    const plain = await dispatch(org.admin);
    const plainClaim = await claim(runner.token);
    expect(plainClaim.body.run_id).toBe(plain);
    const tagged = await dispatch(org.admin, { metadata: { autopilot_ticket: `github:${project.repository}#1` } });
    const taggedClaim = await claim(runner.token);
    expect(taggedClaim.body.run_id).toBe(tagged);

    const ticketCost = parseCost(ticketClaim.headers.get("Docket-Cost"));
    const plainCost = parseCost(plainClaim.headers.get("Docket-Cost"));
    const taggedCost = parseCost(taggedClaim.headers.get("Docket-Cost"));
    expect(plainCost.do_requests).toBe(2); // the scheduler and the run object
    expect(taggedCost.do_requests).toBe(plainCost.do_requests);
    expect(ticketCost.do_requests).toBe(plainCost.do_requests + 1); // and the ticket
  });

  it("a ticket that cannot be asked: the run is not handed out on a guess, and stays queued", async () => {
    const { number, runId } = await admitOne();
    // The ticket's answer fails (its storage is unreadable): the request throws across RPC.
    await runInDurableObject(ticketStub(number), (_o, state) => {
      state.storage.sql.exec("ALTER TABLE ticket RENAME TO ticket_unreadable");
    });
    const res = await claim(runner.token);
    expect(res.status).toBe(204);
    expect((await runOf(runId)).state).toBe("queued");
    await runInDurableObject(ticketStub(number), (_o, state) => {
      state.storage.sql.exec("ALTER TABLE ticket_unreadable RENAME TO ticket");
    });
    const again = await claim(runner.token);
    expect(again.body.run_id).toBe(runId);
  });
});

describe("an admission the ticket has not finished recording", () => {
  it("its run is neither handed out nor cancelled until an observation settles it, then claimed", async () => {
    const { number, runId } = await admitOne();
    // What a crash between the run's creation and the ticket's record of it leaves: the pending generation and the run's id.
    await runInDurableObject(ticketStub(number), (_o, state) => {
      state.storage.sql.exec("UPDATE ticket SET pending_generation = admitted_generation, admitted_generation = NULL, status = 'idle'");
    });
    expect((await claim(runner.token)).status).toBe(204);
    expect((await runOf(runId)).state).toBe("queued");
    const message: AutopilotMessage = { kind: "autopilot.delivery", project_id: project.id, number, delivery_id: crypto.randomUUID(), event: "issues", action: "edited", sender: null };
    expect(await handleDelivery(env, config, fake.deps, message)).toMatchObject({ outcome: "already_admitted", runId });
    expect((await claim(runner.token)).body.run_id).toBe(runId);
  });
});

describe("the ticket retries a failed withdrawal", () => {
  it("from its alarm, without any claim: the run ends cancelled with the reason", async () => {
    const { number, runId } = await admitOne();
    await recordLapseOnly(number, runId, { attempts: 1 });
    expect(await runDurableObjectAlarm(ticketStub(number))).toBe(true);
    const run = await runOf(runId);
    expect(run.state).toBe("cancelled");
    expect(await eventsOf(runId)).toContain(JSON.stringify(LAPSE).slice(1, -1));
    expect(await ticketStub(number).read(ticketAt(number))).toMatchObject({ status: "lapsed", run_id: null, withdrawal: null });
  });

  it("a bounded number of times: a withdrawal that keeps failing stops being retried, and claims still refuse the run", async () => {
    const { number, runId } = await admitOne();
    // The withdrawal is refused every time (the ticket names another organization for the run).
    await recordLapseOnly(number, runId, { orgId: "org_elsewhere" });
    const stub = ticketStub(number);
    let runs = 0;
    while (runs < config.autopilotWithdrawAttemptsMax + 2 && (await runDurableObjectAlarm(stub))) runs += 1;
    expect(runs).toBe(config.autopilotWithdrawAttemptsMax);
    const shown = await call("GET", `/v1/autopilot/projects/${project.id}/tickets/${number}`, { token: org.admin });
    expect(shown.status).toBe(200);
    expect(shown.body.withdrawal).toEqual({ run_id: runId, reason: LAPSE, attempts: config.autopilotWithdrawAttemptsMax });
    expect(await runInDurableObject(stub, (_o, state) => state.storage.getAlarm())).toBeNull();
    expect((await runOf(runId)).state).toBe("queued");
    // The claim's check is what keeps it from starting.
    expect((await claim(runner.token)).status).toBe(204);
    expect((await runOf(runId)).state).toBe("cancelled");
  });

  it("an observation that finds the issue eligible again before the withdrawal: the ticket backs its run again", async () => {
    const { number, runId } = await admitOne();
    await recordLapseOnly(number, runId);
    const message: AutopilotMessage = { kind: "autopilot.delivery", project_id: project.id, number, delivery_id: crypto.randomUUID(), event: "issues", action: "edited", sender: null };
    expect(await handleDelivery(env, config, fake.deps, message)).toMatchObject({ outcome: "already_admitted", runId });
    expect((await ticketStub(number).read(ticketAt(number)))!.withdrawal).toBeNull();
    expect((await claim(runner.token)).body.run_id).toBe(runId);
  });
});
