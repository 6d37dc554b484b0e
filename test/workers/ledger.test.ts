// The credit ledger through the HTTP API: grants, atomic reservations under concurrency, settlement
// below, equal to and above the reservation, replayed completions, cost review and reconciliation
// (../shared/spec/build-lifecycle.md; ../shared/DESIGN.md, invariant 5). The ledger identity is
// checked after every test.

import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { decideSettlement, resolveCost } from "../../src/ledger/settlement";
import {
  auditLedgerAfterEachTest,
  credits,
  deliverEvents,
  dispatchBuild,
  getJob,
  getRequest,
  grantCredit,
  newOrg,
  readyToBuild,
  runEvents,
  runToEnd,
  finalReport,
  waitForJob,
} from "./builds-helpers";
import { call, registerRunner, report } from "./helpers";

auditLedgerAfterEachTest();

describe("grants and GET /v1/credits", () => {
  it("an admin's grant shows as available credit with the entry behind it; a member cannot grant", async () => {
    const { admin } = await newOrg();
    const empty = await credits(admin);
    expect(empty).toMatchObject({ granted_cents: 0, available_cents: 0, held_cents: 0, spent_cents: 0, entries: [] });
    expect(empty.limits).toEqual({ min_available_cents: 1_000, reservation_cents: 2_500 });

    const granted = await call("POST", "/v1/credits/grants", { token: admin, body: { amount_cents: 10_000, note: "welcome" } });
    expect(granted.status).toBe(201);
    expect(granted.body.entry).toMatchObject({ seq: 1, kind: "grant", amount_cents: 10_000, note: "welcome" });
    const after = await credits(admin);
    expect(after).toMatchObject({ granted_cents: 10_000, available_cents: 10_000, held_cents: 0, spent_cents: 0 });
    expect(after.entries.map((e: any) => [e.kind, e.amount_cents])).toEqual([["grant", 10_000]]);

    const member = await call("POST", "/v1/tokens", { token: admin, body: { kind: "member" } });
    const refused = await call("POST", "/v1/credits/grants", { token: member.body.token, body: { amount_cents: 500 } });
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe("forbidden");
    expect((await credits(member.body.token)).granted_cents).toBe(10_000);
  });

  it("a grant repeated with the same Idempotency-Key is granted once; another amount under that key is a conflict", async () => {
    const { admin } = await newOrg();
    expect((await grantCredit(admin, 5_000, "grant-1")).status).toBe(201);
    expect((await grantCredit(admin, 5_000, "grant-1")).status).toBe(200);
    const conflict = await call("POST", "/v1/credits/grants", { token: admin, body: { amount_cents: 7_000, note: "test credit" }, headers: { "Idempotency-Key": "grant-1" } });
    expect(conflict.status).toBe(409);
    expect(conflict.body.error.code).toBe("idempotency_conflict");
    expect((await credits(admin)).granted_cents).toBe(5_000);
  });

  it("the ledger is append-only: D1 itself refuses to change or delete an entry", async () => {
    const { admin, orgId } = await newOrg();
    await grantCredit(admin, 1_000);
    await expect(env.DB.prepare("UPDATE ledger_entries SET amount_cents = 5 WHERE org_id = ?").bind(orgId).run()).rejects.toThrow(/append-only/);
    await expect(env.DB.prepare("DELETE FROM ledger_entries WHERE org_id = ?").bind(orgId).run()).rejects.toThrow(/append-only/);
    // And the balance can never show more held and spent than granted.
    await expect(env.DB.prepare("UPDATE credit_balances SET held_cents = 2000 WHERE org_id = ?").bind(orgId).run()).rejects.toThrow(/CHECK/);
    expect(await credits(admin)).toMatchObject({ granted_cents: 1_000, available_cents: 1_000 });
  });

  it("malformed grants are 400 invalid_request naming the field and change nothing", async () => {
    const { admin } = await newOrg();
    for (const [body, field] of [
      [{ amount_cents: 0 }, "amount_cents"],
      [{ amount_cents: 12.5 }, "amount_cents"],
      [{ amount_cents: "100" }, "amount_cents"],
      [{ amount_cents: 100, extra: 1 }, "body"],
    ] as const) {
      const res = await call("POST", "/v1/credits/grants", { token: admin, body });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: "invalid_request", field });
    }
    expect((await credits(admin)).granted_cents).toBe(0);
  });
});

describe("reservations are atomic", () => {
  it("twenty concurrent dispatches against $100 with $25 each make exactly four reservations", async () => {
    const { admin, requestIds } = await readyToBuild({ creditCents: 10_000, requests: 20 });
    const answers = await Promise.all(requestIds.map((id, i) => dispatchBuild(admin, id, `job-${i}`)));
    const created = answers.filter((a) => a.status === 201);
    const refused = answers.filter((a) => a.status !== 201);
    expect(created).toHaveLength(4);
    expect(created.every((a) => a.body.reserved_cents === 2_500 && a.body.status === "queued")).toBe(true);
    expect(refused).toHaveLength(16);
    expect(refused.every((a) => a.status === 402 && a.body.error.code === "insufficient_credit")).toBe(true);

    const after = await credits(admin);
    expect(after).toMatchObject({ granted_cents: 10_000, available_cents: 0, held_cents: 10_000, spent_cents: 0 });
    expect(after.entries.filter((e: any) => e.kind === "reserve")).toHaveLength(4);
    const labels = await Promise.all(requestIds.map(async (id) => (await getRequest(admin, id)).label));
    expect(labels.filter((l) => l === "queued")).toHaveLength(4);
    expect(labels.filter((l) => l === "source_review")).toHaveLength(16);
  });

  it("a reservation is min($25, available): $110 makes four of $25, one of $10, and then refuses", async () => {
    const { admin, requestIds } = await readyToBuild({ creditCents: 11_000, requests: 6 });
    const reserved: number[] = [];
    for (const id of requestIds.slice(0, 5)) {
      const res = await dispatchBuild(admin, id);
      expect(res.status).toBe(201);
      reserved.push(res.body.reserved_cents);
      expect(res.body.dispatch.payload.usd_cap_cents).toBe(res.body.reserved_cents);
    }
    expect(reserved).toEqual([2_500, 2_500, 2_500, 2_500, 1_000]);
    const sixth = await dispatchBuild(admin, requestIds[5]);
    expect(sixth.status).toBe(402);
    expect(sixth.body.error).toMatchObject({ code: "insufficient_credit", available_cents: 0, min_available_cents: 1_000 });
  });

  it("twenty concurrent dispatches of one request make one queued job; the rest are job_already_queued", async () => {
    const { admin, requestId } = await readyToBuild({ creditCents: 100_000 });
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => dispatchBuild(admin, requestId, `same-request-${i}`)));
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
    const refused = answers.filter((a) => a.status !== 201);
    expect(refused).toHaveLength(19);
    expect(refused.every((a) => a.status === 409 && a.body.error.code === "job_already_queued")).toBe(true);
    expect(await credits(admin)).toMatchObject({ held_cents: 2_500, available_cents: 97_500 });
  });

  it("twenty concurrent dispatches with one job id make one reservation and one run", async () => {
    const { admin, requestId } = await readyToBuild({ creditCents: 100_000 });
    const answers = await Promise.all(Array.from({ length: 20 }, () => dispatchBuild(admin, requestId, "one-job")));
    expect(answers.every((a) => [200, 201].includes(a.status))).toBe(true);
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
    expect(new Set(answers.map((a) => a.body.run_id)).size).toBe(1);
    const after = await credits(admin);
    expect(after.entries.filter((e: any) => e.kind === "reserve")).toHaveLength(1);
    const runs = await call("GET", "/v1/runs", { token: admin });
    expect(runs.body.runs).toHaveLength(1);
  });
});

describe("settlement on completion", () => {
  for (const [name, cost, settled, released] of [
    ["below", 1_200, 1_200, 1_300],
    ["equal to", 2_500, 2_500, 0],
  ] as const) {
    it(`a cost ${name} the reservation settles the cost and releases the rest, once`, async () => {
      const { admin, requestId, runner } = await readyToBuild({ creditCents: 10_000 });
      const job = (await dispatchBuild(admin, requestId, `settle-${cost}`)).body;
      await runToEnd(runner!.token, job.run_id, finalReport(cost));
      const done = await waitForJob(admin, job.id, (j) => j.status !== "queued");
      expect(done).toMatchObject({ status: "settled", outcome: "review", cost_cents: cost, settled_cents: settled, released_cents: released, charged_cents: 0 });
      expect(done.recovery).toMatchObject({ dispatch_accepted: true, reservation_held: false, cost_charged: true, artifact_exists: true });
      expect(await credits(admin)).toMatchObject({ granted_cents: 10_000, held_cents: 0, spent_cents: cost, available_cents: 10_000 - cost });
      const kinds = done.entries.map((e: any) => [e.kind, e.amount_cents]);
      expect(kinds).toEqual(released > 0 ? [["release", released], ["settle", settled], ["reserve", 2_500]] : [["settle", settled], ["reserve", 2_500]]);
      expect((await getRequest(admin, requestId)).label).toBe("review_required");
    });
  }

  it("a cost above the reservation goes to cost review, held and visible, and an admin resolves it; never capped", async () => {
    const { admin, requestId, runner } = await readyToBuild({ creditCents: 10_000 });
    const job = (await dispatchBuild(admin, requestId, "too-expensive")).body;
    await runToEnd(runner!.token, job.run_id, finalReport(3_100));
    const held = await waitForJob(admin, job.id, (j) => j.status !== "queued");
    expect(held).toMatchObject({ status: "cost_review", review_reason: "cost_above_reservation", cost_cents: 3_100, settled_cents: 0, released_cents: 0 });
    expect(held.recovery).toMatchObject({ reservation_held: true, cost_charged: false });
    expect(await credits(admin)).toMatchObject({ held_cents: 2_500, spent_cents: 0, available_cents: 7_500 });
    const listed = await call("GET", "/v1/build-jobs?status=cost_review", { token: admin });
    expect(listed.body.jobs.map((j: any) => j.id)).toEqual(["too-expensive"]);
    // The artifact is ready for review even while the money is in review.
    expect((await getRequest(admin, requestId)).label).toBe("review_required");
    // No new paid job for this request before the cost is reconciled.
    const again = await dispatchBuild(admin, requestId, "too-expensive-2");
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({ code: "cost_review_pending", job_id: "too-expensive" });

    // A member may not resolve; an admin resolves with the reconciled cost.
    const member = await call("POST", "/v1/tokens", { token: admin, body: { kind: "member" } });
    const forbidden = await call("POST", "/v1/build-jobs/too-expensive/resolve", { token: member.body.token, body: { cost_cents: 3_100, note: "x" } });
    expect(forbidden.status).toBe(403);
    const resolved = await call("POST", "/v1/build-jobs/too-expensive/resolve", { token: admin, body: { cost_cents: 3_100, note: "provider invoice checked" } });
    expect(resolved.status).toBe(200);
    expect(resolved.body).toMatchObject({ status: "settled", settled_cents: 2_500, released_cents: 0, charged_cents: 600, resolution: { note: "provider invoice checked" } });
    expect(await credits(admin)).toMatchObject({ granted_cents: 10_000, held_cents: 0, spent_cents: 3_100, available_cents: 6_900 });
    // Resolving twice changes nothing.
    const twice = await call("POST", "/v1/build-jobs/too-expensive/resolve", { token: admin, body: { cost_cents: 3_100, note: "again" } });
    expect(twice.status).toBe(409);
    expect(twice.body.error.code).toBe("job_not_held");
    expect((await credits(admin)).spent_cents).toBe(3_100);
  });

  it("a resolution whose cost above the reservation exceeds the available credit is refused until credit is granted", async () => {
    const { admin, requestId, runner } = await readyToBuild({ creditCents: 2_600 });
    const job = (await dispatchBuild(admin, requestId, "over")).body;
    expect(job.reserved_cents).toBe(2_500);
    await runToEnd(runner!.token, job.run_id, finalReport(4_000));
    await waitForJob(admin, job.id, (j) => j.status === "cost_review");
    const refused = await call("POST", "/v1/build-jobs/over/resolve", { token: admin, body: { cost_cents: 4_000, note: "invoice" } });
    expect(refused.status).toBe(402);
    expect(refused.body.error).toMatchObject({ code: "insufficient_credit", needed_cents: 1_500 });
    expect(await credits(admin)).toMatchObject({ held_cents: 2_500, spent_cents: 0, available_cents: 100 });
    await grantCredit(admin, 1_400);
    const resolved = await call("POST", "/v1/build-jobs/over/resolve", { token: admin, body: { cost_cents: 4_000, note: "invoice" } });
    expect(resolved.status).toBe(200);
    expect(await credits(admin)).toMatchObject({ granted_cents: 4_000, held_cents: 0, spent_cents: 4_000, available_cents: 0 });
  });

  it("an unknown cost on a completed run goes to cost review", async () => {
    const { admin, requestId, runner } = await readyToBuild();
    const job = (await dispatchBuild(admin, requestId, "no-cost")).body;
    await runToEnd(runner!.token, job.run_id, finalReport(null));
    const held = await waitForJob(admin, job.id, (j) => j.status !== "queued");
    expect(held).toMatchObject({ status: "cost_review", review_reason: "cost_unknown", cost_cents: null });
    expect((await credits(admin)).held_cents).toBe(2_500);
    const resolved = await call("POST", "/v1/build-jobs/no-cost/resolve", { token: admin, body: { cost_cents: 900, note: "usage dashboard" } });
    expect(resolved.body).toMatchObject({ status: "settled", settled_cents: 900, released_cents: 1_600 });
  });

  it("an ambiguous failure (launched, failed, no cost) stays held for reconciliation", async () => {
    const { admin, requestId, runner } = await readyToBuild();
    const job = (await dispatchBuild(admin, requestId, "ambiguous")).body;
    await runToEnd(runner!.token, job.run_id, { outcome: "failed", error: "sandbox lost" });
    const held = await waitForJob(admin, job.id, (j) => j.status !== "queued");
    expect(held).toMatchObject({ status: "reconcile", outcome: "failed", review_reason: "ambiguous_failure" });
    expect(held.recovery).toMatchObject({ reservation_held: true, cost_known: false, cost_charged: false });
    expect((await credits(admin)).held_cents).toBe(2_500);
    expect((await getRequest(admin, requestId)).label).toBe("failed");
    // Reconciling the job changes nothing: only a resolution with the reconciled cost releases credit.
    const reconcile = await call("POST", "/v1/build-jobs/ambiguous/reconcile", { token: admin, body: {} });
    expect(reconcile.body.outcome).toBe("held");
    expect((await credits(admin)).held_cents).toBe(2_500);
    const resolved = await call("POST", "/v1/build-jobs/ambiguous/resolve", { token: admin, body: { cost_cents: 0, note: "provider shows no usage" } });
    expect(resolved.body).toMatchObject({ status: "settled", settled_cents: 0, released_cents: 2_500 });
  });

  it("a failure with a reported cost settles as failed; a run cancelled before launch releases everything", async () => {
    const { admin, requestIds, runner } = await readyToBuild({ requests: 2 });
    const failed = (await dispatchBuild(admin, requestIds[0], "failed-with-cost")).body;
    await runToEnd(runner!.token, failed.run_id, { outcome: "failed", error: "tests failed", cost_cents: 700 });
    expect(await waitForJob(admin, failed.id, (j) => j.status !== "queued")).toMatchObject({ status: "settled", outcome: "failed", settled_cents: 700, released_cents: 1_800 });
    expect((await getRequest(admin, requestIds[0])).label).toBe("failed");

    const cancelled = (await dispatchBuild(admin, requestIds[1], "cancelled-early")).body;
    expect((await call("POST", `/v1/runs/${cancelled.run_id}/cancel`, { token: admin, body: {} })).status).toBe(200);
    expect(await waitForJob(admin, cancelled.id, (j) => j.status !== "queued")).toMatchObject({ status: "settled", outcome: "cancelled", settled_cents: 0, released_cents: 2_500 });
    expect((await getRequest(admin, requestIds[1])).label).toBe("source_review");
    expect(await credits(admin)).toMatchObject({ held_cents: 0, spent_cents: 700 });
  });
});

describe("a replayed completion changes nothing", () => {
  it("the run's events delivered again, out of order, and the completion callback called twice settle once", async () => {
    const { admin, orgId, requestId, runner } = await readyToBuild();
    const job = (await dispatchBuild(admin, requestId, "replayed")).body;
    const claimed = await runToEnd(runner!.token, job.run_id, finalReport(1_000));
    const settled = await waitForJob(admin, job.id, (j) => j.status === "settled");
    const before = await credits(admin);

    const events = await runEvents(admin, job.run_id, orgId);
    expect(events.some((e) => e.type === "run.state" && e.data.to === "completed")).toBe(true);
    const result = await deliverEvents([...events].reverse().concat(events));
    expect(result.retryMessages).toEqual([]);
    for (let i = 0; i < 2; i++) {
      const callback = await call("POST", new URL(job.dispatch.payload.callback_url).pathname, { body: { outcome: "completed", cost_cents: 1 } });
      expect(callback.status).toBe(200);
      expect(callback.body).toEqual({ job_id: "replayed", status: "settled" });
    }
    // The daemon's final report sent again is refused by the ended run; nothing moves.
    const late = await report(claimed.attempt_token, job.run_id, { final: finalReport(5) });
    expect(late.status).toBe(410);
    expect(late.body.error.code).toBe("task_gone");

    const after = await credits(admin);
    expect(after).toEqual(before);
    const again = await getJob(admin, job.id);
    expect(again).toMatchObject({ status: "settled", settled_cents: settled.settled_cents, released_cents: settled.released_cents, updated_at_ms: settled.updated_at_ms });
    expect(after.entries.filter((e: any) => e.job_id === job.id).map((e: any) => e.kind).sort()).toEqual(["release", "reserve", "settle"]);
  });

  it("the completion callback settles a finished job even when no event arrived", async () => {
    const { admin, requestId, runner } = await readyToBuild();
    const job = (await dispatchBuild(admin, requestId, "callback-first")).body;
    await runToEnd(runner!.token, job.run_id, finalReport(400));
    // Whichever comes first, the callback or the event, settles; the other changes nothing.
    const callback = await call("POST", new URL(job.dispatch.payload.callback_url).pathname, {});
    expect(callback.status).toBe(200);
    expect(callback.body.status).toBe("settled");
    expect(await credits(admin)).toMatchObject({ held_cents: 0, spent_cents: 400 });
    const unknown = await call("POST", `/v1/build-callbacks/cb_${"0".repeat(48)}`, {});
    expect(unknown.status).toBe(404);
  });
});

describe("the settlement decision (pure)", () => {
  it("decides settle, cost review or reconcile from the run's end, cost and launch", () => {
    expect(decideSettlement(2_500, { state: "completed", cost_cents: 0, launched: true })).toMatchObject({ kind: "settle", settleCents: 0, releaseCents: 2_500 });
    expect(decideSettlement(2_500, { state: "completed", cost_cents: 2_501, launched: true })).toMatchObject({ kind: "hold", status: "cost_review", reason: "cost_above_reservation" });
    expect(decideSettlement(2_500, { state: "completed", cost_cents: null, launched: true })).toMatchObject({ kind: "hold", status: "cost_review", reason: "cost_unknown" });
    expect(decideSettlement(2_500, { state: "failed", cost_cents: null, launched: true })).toMatchObject({ kind: "hold", status: "reconcile", reason: "ambiguous_failure" });
    expect(decideSettlement(2_500, { state: "cancelled", cost_cents: null, launched: true })).toMatchObject({ kind: "hold", status: "reconcile" });
    expect(decideSettlement(2_500, { state: "failed", cost_cents: null, launched: false })).toMatchObject({ kind: "settle", outcome: "failed", settleCents: 0, releaseCents: 2_500 });
    expect(resolveCost(2_500, 3_000)).toEqual({ settleCents: 2_500, releaseCents: 0, chargeCents: 500 });
    expect(resolveCost(2_500, 100)).toEqual({ settleCents: 100, releaseCents: 2_400, chargeCents: 0 });
  });
});

describe("organizations", () => {
  it("no member reads or changes another organization's credit, jobs or requests", async () => {
    const a = await readyToBuild({ name: "a" });
    const b = await newOrg("b");
    await registerRunner(b.admin);
    const job = (await dispatchBuild(a.admin, a.requestId, "a-job")).body;
    expect((await call("GET", "/v1/build-jobs/a-job", { token: b.admin })).status).toBe(404);
    expect((await call("GET", `/v1/build-requests/${a.requestId}`, { token: b.admin })).status).toBe(404);
    expect((await dispatchBuild(b.admin, a.requestId, "b-job")).status).toBe(404);
    expect((await call("POST", "/v1/build-jobs/a-job/resolve", { token: b.admin, body: { cost_cents: 0, note: "x" } })).status).toBe(404);
    expect((await call("POST", "/v1/build-jobs/a-job/reconcile", { token: b.admin, body: { action: "release" } })).status).toBe(404);
    expect(await credits(b.admin)).toMatchObject({ granted_cents: 0, entries: [] });
    expect((await getJob(a.admin, job.id)).status).toBe("queued");
  });
});
