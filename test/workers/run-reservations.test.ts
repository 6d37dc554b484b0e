// An autopilot run's model-spend reservation held for cost review, and an admin's resolution of it
// (docs/protocol.md, "Run reservations and cost review"): the list, the resolution's money (settle,
// release, charge; never capped), the project's budget after it, exactly once under concurrency.

import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { dispatchRun } from "../../src/run/dispatch";
import { auditLedgerAfterEachTest, expectLedgerIdentity, finalReport, grantCredit, newOrg } from "./builds-helpers";
import { createProject, installRealAutopilotWithTracker } from "./autopilot-fakes";
import { page, signIn } from "./dashboard-helpers";
import { attemptCall, call, claim, registerRunner, report } from "./helpers";

type Json = Record<string, any>;

installRealAutopilotWithTracker();
auditLedgerAfterEachTest();
let nextOrg = 0;

/** An organization with `creditCents` of credit, one runner, and a project whose budget reserves `perRunCents` a run. */
async function budgeted(creditCents: number, perRunCents: number) {
  const org = await newOrg(`reservations-${++nextOrg}`);
  const project = await createProject(org.admin);
  const runner = await registerRunner(org.admin);
  await grantCredit(org.admin, creditCents);
  const res = await call("PATCH", `/v1/autopilot/projects/${project.id}/scheduler`, { token: org.admin, body: { budget: { limit_cents: 10_000, per_run_cents: perRunCents } } });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return { ...org, projectId: project.id, runner };
}

type Org = Awaited<ReturnType<typeof budgeted>>;

/** A project run handed out, launched and ended with `final`'s cost; answers its reservation once the run's end was applied. */
async function runEnding(s: Org, final: Json): Promise<{ runId: string; reservation: Json }> {
  const { run } = await dispatchRun(env, s.orgId, { brief: "fix the bug", launch: { command: ["node", "agent.mjs"] } }, null, { projectId: s.projectId });
  const grant = await claim(s.runner.token, 0);
  expect(grant.status).toBe(200);
  expect(grant.body.run_id).toBe(run.id);
  expect((await attemptCall(s.runner.token, run.id, grant.body.attempt, "launched", { sandbox_id: "sbx-1" })).status).toBe(200);
  expect((await report(grant.body.attempt_token, run.id, { final })).status).toBe(200);
  const reservation = await vi.waitFor(
    async () => {
      const found = (await reservations(s.admin, s.projectId)).reservations.find((r: Json) => r.run_id === run.id);
      if (found?.status === "held") throw new Error("the run's end is not applied yet");
      return found;
    },
    { timeout: 20_000, interval: 50 },
  );
  return { runId: run.id, reservation };
}

async function reservations(token: string, projectId: string, query = ""): Promise<Json> {
  const res = await call("GET", `/v1/autopilot/projects/${projectId}/reservations${query}`, { token });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

function resolve(token: string, projectId: string, runId: string, body: unknown) {
  return call("POST", `/v1/autopilot/projects/${projectId}/reservations/${runId}/resolve`, { token, body });
}

async function budget(token: string, projectId: string): Promise<Json> {
  const res = await call("GET", `/v1/autopilot/projects/${projectId}/scheduler`, { token });
  expect(res.status).toBe(200);
  return res.body.budget;
}

/** The run's ledger entries as [kind, amount, actor], in ledger order. */
async function runEntries(token: string, runId: string): Promise<[string, number, string][]> {
  const res = await call("GET", "/v1/credits?limit=200", { token });
  expect(res.status).toBe(200);
  return res.body.entries
    .filter((e: Json) => e.run_id === runId)
    .sort((a: Json, b: Json) => a.seq - b.seq)
    .map((e: Json) => [e.kind, e.amount_cents, e.actor]);
}

describe("a run reservation held for cost review", () => {
  it("a run ending with an unknown cost is listed in cost_review and the project's budget keeps it held; resolved within the hold it settles and releases the rest", async () => {
    const s = await budgeted(1_000, 100);
    const { runId, reservation } = await runEnding(s, finalReport(null));
    expect(reservation).toMatchObject({ project_id: s.projectId, status: "cost_review", reserved_cents: 100, cost_cents: null, settled_cents: 0, released_cents: 0, charged_cents: 0, resolution: null });
    expect(await budget(s.admin, s.projectId)).toMatchObject({ held_cents: 100, spent_cents: 0 });
    expect(await expectLedgerIdentity(s.admin)).toMatchObject({ held_cents: 100, spent_cents: 0 });

    const resolved = await resolve(s.admin, s.projectId, runId, { cost_cents: 40, note: "provider invoice checked" });
    expect(resolved.status, JSON.stringify(resolved.body)).toBe(200);
    expect(resolved.body).toMatchObject({ run_id: runId, status: "settled", cost_cents: 40, settled_cents: 40, released_cents: 60, charged_cents: 0, resolution: { note: "provider invoice checked" } });
    const actor = resolved.body.resolution.by;
    expect(actor).toMatch(/^member:tok_[0-9a-f]{24}$/);
    expect(await runEntries(s.admin, runId)).toEqual([
      ["reserve", 100, "scheduler"],
      ["settle", 40, actor],
      ["release", 60, actor],
    ]);
    expect(await expectLedgerIdentity(s.admin)).toMatchObject({ granted_cents: 1_000, held_cents: 0, spent_cents: 40 });
    expect(await budget(s.admin, s.projectId)).toMatchObject({ held_cents: 0, spent_cents: 40, left_cents: 10_000 - 40 });
    expect((await reservations(s.admin, s.projectId, "?status=settled")).reservations).toEqual([resolved.body]);
  });

  it("a failed run with an unknown cost goes to reconcile, and its resolution at zero releases it all", async () => {
    const s = await budgeted(1_000, 100);
    const { runId, reservation } = await runEnding(s, finalReport(null, { outcome: "failed", exit_codes: { agent: 1 } }));
    expect(reservation).toMatchObject({ status: "reconcile", cost_cents: null });
    const resolved = await resolve(s.admin, s.projectId, runId, { cost_cents: 0, note: "no model calls were billed" });
    expect(resolved.status, JSON.stringify(resolved.body)).toBe(200);
    expect(resolved.body).toMatchObject({ status: "settled", cost_cents: 0, settled_cents: 0, released_cents: 100, charged_cents: 0 });
    expect((await runEntries(s.admin, runId)).map(([kind, amount]) => [kind, amount])).toEqual([
      ["reserve", 100],
      ["settle", 0],
      ["release", 100],
    ]);
    expect(await budget(s.admin, s.projectId)).toMatchObject({ held_cents: 0, spent_cents: 0 });
  });

  it("a cost above the hold is charged to available credit; refused 402 with needed_cents while credit is short, changing nothing", async () => {
    const s = await budgeted(150, 100);
    const { runId, reservation } = await runEnding(s, finalReport(300));
    expect(reservation).toMatchObject({ status: "cost_review", cost_cents: 300 });

    const refused = await resolve(s.admin, s.projectId, runId, { cost_cents: 300, note: "invoice" });
    expect(refused.status).toBe(402);
    expect(refused.body.error).toMatchObject({ code: "insufficient_credit", needed_cents: 200 });
    expect((await reservations(s.admin, s.projectId)).reservations[0]).toEqual(reservation);
    expect(await expectLedgerIdentity(s.admin)).toMatchObject({ held_cents: 100, spent_cents: 0, available_cents: 50 });
    expect(await budget(s.admin, s.projectId)).toMatchObject({ held_cents: 100, spent_cents: 0 });
    expect((await runEntries(s.admin, runId)).map(([kind]) => kind)).toEqual(["reserve"]);

    await grantCredit(s.admin, 150);
    const resolved = await resolve(s.admin, s.projectId, runId, { cost_cents: 300, note: "invoice" });
    expect(resolved.status, JSON.stringify(resolved.body)).toBe(200);
    expect(resolved.body).toMatchObject({ status: "settled", cost_cents: 300, settled_cents: 100, released_cents: 0, charged_cents: 200 });
    expect((await runEntries(s.admin, runId)).map(([kind, amount]) => [kind, amount])).toEqual([
      ["reserve", 100],
      ["settle", 100],
      ["charge", 200],
    ]);
    expect(await expectLedgerIdentity(s.admin)).toMatchObject({ granted_cents: 300, held_cents: 0, spent_cents: 300, available_cents: 0 });
    expect(await budget(s.admin, s.projectId)).toMatchObject({ held_cents: 0, spent_cents: 300 });
  });

  it("two concurrent resolutions: one wins, the other is reservation_not_held, and the money moves once", async () => {
    const s = await budgeted(1_000, 100);
    const { runId } = await runEnding(s, finalReport(null));
    const answers = await Promise.all([
      resolve(s.admin, s.projectId, runId, { cost_cents: 30, note: "first" }),
      resolve(s.admin, s.projectId, runId, { cost_cents: 70, note: "second" }),
    ]);
    expect(answers.map((a) => a.status).sort()).toEqual([200, 409]);
    const won = answers.find((a) => a.status === 200)!.body;
    const lost = answers.find((a) => a.status === 409)!.body;
    expect(lost.error).toMatchObject({ code: "reservation_not_held", status: "settled" });
    expect((await runEntries(s.admin, runId)).map(([kind]) => kind)).toEqual(["reserve", "settle", "release"]);
    expect(await expectLedgerIdentity(s.admin)).toMatchObject({ held_cents: 0, spent_cents: won.cost_cents });
    expect(await budget(s.admin, s.projectId)).toMatchObject({ held_cents: 0, spent_cents: won.cost_cents });

    const again = await resolve(s.admin, s.projectId, runId, { cost_cents: 30, note: "again" });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe("reservation_not_held");
    expect(await budget(s.admin, s.projectId)).toMatchObject({ held_cents: 0, spent_cents: won.cost_cents });
  });

  it("a budget hold the scheduler did not settle at the resolution is settled by a repeated resolve, which changes no money", async () => {
    const s = await budgeted(1_000, 100);
    const { runId } = await runEnding(s, finalReport(null));
    expect((await resolve(s.admin, s.projectId, runId, { cost_cents: 60, note: "invoice" })).status).toBe(200);
    // As if the scheduler's call had failed after the ledger batch: its hold is still in review.
    await runInDurableObject(env.SCHEDULER.get(env.SCHEDULER.idFromName(s.orgId)), (_o, state) => {
      state.storage.sql.exec("UPDATE budget_holds SET status = 'review', cost_cents = NULL WHERE run_id = ?", runId);
      state.storage.sql.exec("UPDATE project_gates SET budget_spent_cents = budget_spent_cents - 60 WHERE project_id = ?", s.projectId);
    });
    expect(await budget(s.admin, s.projectId)).toMatchObject({ held_cents: 100, spent_cents: 0 });
    const again = await resolve(s.admin, s.projectId, runId, { cost_cents: 60, note: "again" });
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({ code: "reservation_not_held", status: "settled" });
    expect(await budget(s.admin, s.projectId)).toMatchObject({ held_cents: 0, spent_cents: 60 });
    expect(await expectLedgerIdentity(s.admin)).toMatchObject({ held_cents: 0, spent_cents: 60 });
    expect((await runEntries(s.admin, runId)).map(([kind]) => kind)).toEqual(["reserve", "settle", "release"]);
  });

  it("only an admin resolves; bad input names the field; another organization's project or an unknown run is not_found; nothing changes", async () => {
    const s = await budgeted(1_000, 100);
    const { runId, reservation } = await runEnding(s, finalReport(null));
    const member = await call("POST", "/v1/tokens", { token: s.admin, body: { kind: "member" } });
    const forbidden = await resolve(member.body.token, s.projectId, runId, { cost_cents: 10, note: "x" });
    expect(forbidden.status).toBe(403);
    expect(forbidden.body.error.code).toBe("forbidden");
    // A member reads the list.
    expect((await reservations(member.body.token, s.projectId)).reservations.map((r: Json) => r.run_id)).toEqual([runId]);

    for (const [body, field] of [
      [{ note: "x" }, "cost_cents"],
      [{ cost_cents: -1, note: "x" }, "cost_cents"],
      [{ cost_cents: 1.5, note: "x" }, "cost_cents"],
      [{ cost_cents: 10 }, "note"],
      [{ cost_cents: 10, note: "  " }, "note"],
      [{ cost_cents: 10, note: "x", extra: true }, "body"],
    ] as const) {
      const bad = await resolve(s.admin, s.projectId, runId, body);
      expect(bad.status, JSON.stringify(body)).toBe(400);
      expect(bad.body.error).toMatchObject({ code: "invalid_request", field });
    }
    const badRun = await resolve(s.admin, s.projectId, "not-a-run", { cost_cents: 10, note: "x" });
    expect(badRun.status).toBe(400);
    expect(badRun.body.error).toMatchObject({ code: "invalid_request", field: "run_id" });
    const badStatus = await call("GET", `/v1/autopilot/projects/${s.projectId}/reservations?status=open`, { token: s.admin });
    expect(badStatus.status).toBe(400);
    expect(badStatus.body.error).toMatchObject({ code: "invalid_request", field: "status" });

    const unknown = await resolve(s.admin, s.projectId, `run_${"0".repeat(24)}`, { cost_cents: 10, note: "x" });
    expect(unknown.status).toBe(404);
    const other = await newOrg("intruder");
    expect((await resolve(other.admin, s.projectId, runId, { cost_cents: 10, note: "x" })).status).toBe(404);
    expect((await call("GET", `/v1/autopilot/projects/${s.projectId}/reservations`, { token: other.admin })).status).toBe(404);
    // Another organization's own project does not see this run's reservation either.
    const otherProject = await createProject(other.admin, { repository: "intruder/repo" });
    expect((await resolve(other.admin, otherProject.id, runId, { cost_cents: 10, note: "x" })).status).toBe(404);

    expect((await reservations(s.admin, s.projectId)).reservations).toEqual([reservation]);
    expect(await budget(s.admin, s.projectId)).toMatchObject({ held_cents: 100, spent_cents: 0 });
  });

  it("lists the project's reservations most recently reserved first, in pages, and by status", async () => {
    const s = await budgeted(1_000, 100);
    const first = await runEnding(s, finalReport(20));
    const second = await runEnding(s, finalReport(null));
    const third = await runEnding(s, finalReport(500));
    const all = (await reservations(s.admin, s.projectId)).reservations;
    expect(all.map((r: Json) => [r.run_id, r.status])).toEqual([
      [third.runId, "cost_review"],
      [second.runId, "cost_review"],
      [first.runId, "settled"],
    ]);
    const paged: Json[] = [];
    let cursor: string | null = null;
    for (let pages = 0; pages < 5; pages++) {
      const listed: Json = await reservations(s.admin, s.projectId, `?limit=1${cursor ? `&cursor=${cursor}` : ""}`);
      paged.push(...listed.reservations);
      cursor = listed.next_cursor;
      if (!cursor) break;
    }
    expect(paged).toEqual(all);
    expect((await reservations(s.admin, s.projectId, "?status=cost_review")).reservations.map((r: Json) => r.run_id)).toEqual([third.runId, second.runId]);
    expect((await reservations(s.admin, s.projectId, "?status=settled")).reservations.map((r: Json) => r.run_id)).toEqual([first.runId]);
  });

  it("the dashboard's credits page lists a run's reservation under Holds while it runs and while it waits for cost review, and offers the resolve form only in review", async () => {
    const s = await budgeted(1_000, 100);
    const { runId: reviewed } = await runEnding(s, finalReport(null));
    const { run } = await dispatchRun(env, s.orgId, { brief: "fix another bug", launch: { command: ["node", "agent.mjs"] } }, null, { projectId: s.projectId });
    expect((await claim(s.runner.token, 0)).body.run_id).toBe(run.id);
    const other = await budgeted(1_000, 100);
    const { runId: elsewhere } = await runEnding(other, finalReport(null));

    const res = await page("/dash/credits", { cookie: await signIn(s.admin) });
    expect(res.status).toBe(200);
    const table = (id: string) => res.text.slice(res.text.indexOf(`<table id="${id}"`), res.text.indexOf("</table>", res.text.indexOf(`<table id="${id}"`)));
    expect(table("run-holds")).toContain(`<tr data-run="${run.id}">`);
    expect(table("run-holds")).toContain("hello-world autopilot");
    expect(table("run-holds")).toContain("$1.00");
    // A reservation in cost review still holds credit: Holds lists it too, so its rows account for Held.
    expect(table("run-holds")).toContain(`<tr data-run="${reviewed}">`);
    expect(res.text.slice(res.text.indexOf('<table id="balance">'))).toContain("<th scope=\"row\">Held</th><td>$2.00</td>");
    expect(table("run-review")).toContain(`<tr data-run="${reviewed}">`);
    expect(table("run-review")).toContain("cost_review");
    expect(table("run-review")).toContain("unknown");
    // The one in review has the admin's resolve form; the one still holding credit has none.
    expect(table("run-review")).toContain(`action="/dash/autopilot/projects/${s.projectId}/reservations/${reviewed}/resolve"`);
    expect(table("run-holds")).not.toContain("/resolve");
    // Another organization's reservations are never shown.
    expect(res.text).not.toContain(elsewhere);
  });
});
