// Build requests and paid dispatch through the HTTP API, as a new user would: project, license,
// plan, dispatch keyed by the job id, completion with an artifact for review, refused
// preconditions, idempotent replay and conflict, and the reconciliation of a dispatch that could
// not be confirmed (../shared/spec/build-lifecycle.md). The ledger identity is checked after every test.

import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { reconcileUnconfirmedJobs, settleEndedJobs } from "../../src/builds/reconcile";
import { runEngine } from "../../src/builds/run-engine";
import { loadConfig } from "../../src/config";
import { DocketError } from "../../src/errors";
import { EVENT_EFFECTS } from "../../src/queue/effects";
import {
  acceptLicense,
  ageDispatch,
  ageRunners,
  auditLedgerAfterEachTest,
  COMMIT,
  createProject,
  createRequest,
  credits,
  dispatchBuild,
  finalReport,
  getJob,
  getRequest,
  grantCredit,
  newOrg,
  plan,
  readyToBuild,
  runCount,
  runToEnd,
  savePlan,
  SOURCE_URL,
  waitForJob,
} from "./builds-helpers";
import { call, getRun, registerRunner } from "./helpers";

auditLedgerAfterEachTest();

/** The run object cannot be reached: the dispatch's outcome is unknown to the API. */
function runObjectUnreachable() {
  return vi.spyOn(runEngine, "dispatch").mockRejectedValue(new Error("Network connection lost."));
}

describe("a new user's build, from project to review", () => {
  it("requested → source review → queued → review required, with the spec's dispatch payload and a retrievable artifact", async () => {
    const { admin } = await newOrg();
    await grantCredit(admin, 5_000);
    const runner = await registerRunner(admin);
    const projectId = await createProject(admin, { launch: { command: ["node", "agent.mjs"], env: { MODEL: "m" } } });
    await acceptLicense(admin, projectId);
    const created = await call("POST", `/v1/projects/${projectId}/requests`, { token: admin, body: { title: "migrate the vault" } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ label: "requested", plan: null, jobs: [] });
    const requestId = created.body.id;

    const planned = await savePlan(admin, requestId);
    expect(planned).toMatchObject({ label: "source_review", plan: { pinned_commit: COMMIT, chain_target: "base-sepolia" } });

    const dispatched = await dispatchBuild(admin, requestId, "job-2024-001");
    expect(dispatched.status).toBe(201);
    const job = dispatched.body;
    expect(job).toMatchObject({ id: "job-2024-001", status: "queued", reserved_cents: 2_500, message: null });
    expect(job.dispatch.payload).toEqual({
      job_id: "job-2024-001",
      request_id: requestId,
      project_id: projectId,
      source_url: SOURCE_URL,
      pinned_commit: COMMIT,
      migration_plan: "Move Vault to the v2 storage layout",
      chain_target: "base-sepolia",
      usd_cap_cents: 2_500,
      callback_url: expect.stringMatching(/^http:\/\/docket\.test\/v1\/build-callbacks\/cb_[0-9a-f]{48}$/),
    });
    expect((await getRequest(admin, requestId)).label).toBe("queued");
    expect(await credits(admin)).toMatchObject({ available_cents: 2_500, held_cents: 2_500 });

    // The run carries the payload: source, pinned commit, plan, cap and the exact callback URL.
    const run = await getRun(admin, job.run_id);
    expect(run).toMatchObject({
      state: "queued",
      brief: "Move Vault to the v2 storage layout",
      repository: { url: SOURCE_URL, commit: COMMIT },
      callback_url: job.dispatch.payload.callback_url,
      metadata: { docket_job_id: "job-2024-001", docket_request_id: requestId, docket_chain_target: "base-sepolia", docket_usd_cap_cents: "2500" },
    });
    expect(run.launch.env).toMatchObject({ MODEL: "m", DOCKET_JOB_ID: "job-2024-001", DOCKET_USD_CAP_CENTS: "2500", DOCKET_PINNED_COMMIT: COMMIT });

    const claimed = await runToEnd(runner.token, job.run_id, finalReport(800));
    expect(claimed.repository).toEqual({ url: SOURCE_URL, commit: COMMIT });
    const done = await waitForJob(admin, job.id, (j) => j.status === "settled");
    expect(done).toMatchObject({ outcome: "review", cost_cents: 800, artifact: { exists: true, empty: false } });
    expect((await getRequest(admin, requestId)).label).toBe("review_required");

    const artifact = await call("GET", `/v1/build-jobs/${job.id}/artifact`, { token: admin });
    expect(artifact.status).toBe(200);
    expect(artifact.body).toMatchObject({
      job_id: "job-2024-001",
      outcome: "review",
      patch: expect.stringContaining("diff --git a/Vault.sol"),
      empty: false,
      incomplete: false,
      source_revision: COMMIT,
      exit_codes: { agent: 0, tests: 0 },
      model: "model-x",
      limitations: ["no mainnet dry run"],
    });
    // Nothing advances a request to the release stages on its own.
    expect((await getRequest(admin, requestId)).label).not.toMatch(/ready_to_deploy|live/);
  });

  it("an empty or incomplete patch is shown as such", async () => {
    const { admin, runner, requestIds } = await readyToBuild({ requests: 2 });
    const empty = (await dispatchBuild(admin, requestIds[0], "empty-patch")).body;
    await runToEnd(runner!.token, empty.run_id, finalReport(100, { artifact: { patch: "", source_revision: COMMIT, model: "m", limitations: [] } }));
    await waitForJob(admin, empty.id, (j) => j.status === "settled");
    const a = await call("GET", "/v1/build-jobs/empty-patch/artifact", { token: admin });
    expect(a.body).toMatchObject({ empty: true, patch: "", notes: ["the patch is empty: the run returned no changes"] });

    const partial = (await dispatchBuild(admin, requestIds[1], "partial-patch")).body;
    await runToEnd(runner!.token, partial.run_id, finalReport(100, { exit_codes: { agent: 0, tests: 1 } }));
    await waitForJob(admin, partial.id, (j) => j.status === "settled");
    const b = await call("GET", "/v1/build-jobs/partial-patch/artifact", { token: admin });
    expect(b.body).toMatchObject({ empty: false, incomplete: true, notes: ["command tests exited with 1"] });
  });

  it("a job with no run or no artifact yet answers 404 for its artifact", async () => {
    const { admin, requestId } = await readyToBuild();
    await dispatchBuild(admin, requestId, "waiting");
    const res = await call("GET", "/v1/build-jobs/waiting/artifact", { token: admin });
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe("not_found");
  });
});

describe("the dispatcher's preconditions, each with its own code", () => {
  it("no saved plan: plan_required", async () => {
    const { admin, projectId } = await readyToBuild({ requests: 0 });
    const requestId = await createRequest(admin, projectId);
    const res = await dispatchBuild(admin, requestId, "no-plan");
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe("plan_required");
    expect((await getRequest(admin, requestId)).label).toBe("requested");
  });

  it("no accepted license: license_required", async () => {
    const { admin } = await newOrg();
    await grantCredit(admin, 10_000);
    await registerRunner(admin);
    const projectId = await createProject(admin);
    const requestId = await createRequest(admin, projectId);
    await savePlan(admin, requestId);
    const res = await dispatchBuild(admin, requestId, "no-license");
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe("license_required");
  });

  it("no runner, or none heard from within the heartbeat window: no_connected_runner", async () => {
    const { admin, orgId, requestId } = await readyToBuild({ runner: false });
    const none = await dispatchBuild(admin, requestId, "no-runner");
    expect(none.status).toBe(409);
    expect(none.body.error).toMatchObject({ code: "no_connected_runner", window_ms: 90_000 });
    expect(none.body.error.message).toMatch(/^no runner that can serve this project \(protocol process(, label [^,)]+)*\) was heard from/);

    await registerRunner(admin);
    await ageRunners(orgId, 90_001);
    const silent = await dispatchBuild(admin, requestId, "silent-runner");
    expect(silent.status).toBe(409);
    expect(silent.body.error.code).toBe("no_connected_runner");

    // A runner whose labels cannot serve the project does not count either.
    const labelled = await createProject(admin, { labels: ["gpu"] });
    await acceptLicense(admin, labelled);
    const gpuRequest = await createRequest(admin, labelled);
    await savePlan(admin, gpuRequest);
    await registerRunner(admin, { labels: ["linux"] });
    expect((await dispatchBuild(admin, gpuRequest, "wrong-labels")).body.error.code).toBe("no_connected_runner");
    expect((await dispatchBuild(admin, requestId, "connected")).status).toBe(201);
  });

  it("less than $10 available: insufficient_credit", async () => {
    const { admin, requestId } = await readyToBuild({ creditCents: 0 });
    const none = await dispatchBuild(admin, requestId, "broke");
    expect(none.status).toBe(402);
    expect(none.body.error).toMatchObject({ code: "insufficient_credit", available_cents: 0, min_available_cents: 1_000 });
    await grantCredit(admin, 999);
    expect((await dispatchBuild(admin, requestId, "almost")).body.error.code).toBe("insufficient_credit");
    await grantCredit(admin, 1);
    const enough = await dispatchBuild(admin, requestId, "enough");
    expect(enough.status).toBe(201);
    expect(enough.body.reserved_cents).toBe(1_000);
  });

  it("refused dispatches change nothing: no job, no entry, no run, the label unchanged", async () => {
    const { admin, requestId } = await readyToBuild({ creditCents: 500 });
    expect((await dispatchBuild(admin, requestId, "refused")).status).toBe(402);
    expect((await call("GET", "/v1/build-jobs/refused", { token: admin })).status).toBe(404);
    expect(await credits(admin)).toMatchObject({ granted_cents: 500, held_cents: 0, entries: [expect.objectContaining({ kind: "grant" })] });
    expect(await runCount(admin)).toBe(0);
    expect((await getRequest(admin, requestId)).label).toBe("source_review");
  });

  it("a request with a queued job: job_already_queued, and its plan is locked", async () => {
    const { admin, requestId } = await readyToBuild();
    expect((await dispatchBuild(admin, requestId, "first")).status).toBe(201);
    const second = await dispatchBuild(admin, requestId, "second");
    expect(second.status).toBe(409);
    expect(second.body.error).toMatchObject({ code: "job_already_queued", job_id: "first" });
    const replan = await call("PUT", `/v1/build-requests/${requestId}/plan`, { token: admin, body: plan({ chain_target: "base" }) });
    expect(replan.status).toBe(409);
    expect(replan.body.error).toMatchObject({ code: "request_locked", label: "queued", message: "the plan cannot change once the request is labelled queued" });
  });
});

describe("dispatch is keyed by the job id", () => {
  it("the same job id and payload replays the job without scheduling duplicate work", async () => {
    const { admin, requestId } = await readyToBuild();
    const first = await dispatchBuild(admin, requestId, "stable-id");
    expect(first.status).toBe(201);
    const again = await dispatchBuild(admin, requestId, "stable-id");
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ id: "stable-id", run_id: first.body.run_id, reserved_cents: 2_500 });
    expect(await runCount(admin)).toBe(1);
    expect((await credits(admin)).entries.filter((e: any) => e.kind === "reserve")).toHaveLength(1);
  });

  it("the same job id with another payload is 409 idempotency_conflict and changes nothing", async () => {
    const { admin, requestIds } = await readyToBuild({ requests: 2 });
    expect((await dispatchBuild(admin, requestIds[0], "taken")).status).toBe(201);
    const other = await dispatchBuild(admin, requestIds[1], "taken");
    expect(other.status).toBe(409);
    expect(other.body.error).toMatchObject({ code: "idempotency_conflict", job_id: "taken" });
    expect((await getRequest(admin, requestIds[1])).label).toBe("source_review");
    expect((await credits(admin)).held_cents).toBe(2_500);

    // After the first job ends and the plan changes, the old job id names another payload too.
    const run = (await getJob(admin, "taken")).run_id;
    await call("POST", `/v1/runs/${run}/cancel`, { token: admin, body: {} });
    await waitForJob(admin, "taken", (j) => j.status === "settled");
    await savePlan(admin, requestIds[0], { chain_target: "base-mainnet" });
    expect((await dispatchBuild(admin, requestIds[0], "taken")).body.error.code).toBe("idempotency_conflict");
  });

  it("a job id already used as another run's Idempotency-Key is a conflict, before any credit is reserved", async () => {
    const { admin, requestId } = await readyToBuild();
    const plain = await call("POST", "/v1/runs", { token: admin, body: { brief: "x", launch: { command: ["true"] } }, headers: { "Idempotency-Key": "shared-key" } });
    expect(plain.status).toBe(201);
    const res = await dispatchBuild(admin, requestId, "shared-key");
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe("idempotency_conflict");
    expect((await credits(admin)).held_cents).toBe(0);
  });

  it("a dispatch the run engine refuses definitively (its key names another run) releases the reservation at once", async () => {
    const { admin, requestId } = await readyToBuild();
    const other = await call("POST", "/v1/runs", { token: admin, body: { brief: "x", launch: { command: ["true"] } } });
    vi.spyOn(runEngine, "dispatch").mockRejectedValueOnce(
      new DocketError("idempotency_conflict", "this Idempotency-Key was used with another payload", { run_id: other.body.id }),
    );
    const res = await dispatchBuild(admin, requestId, "raced-key");
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe("idempotency_conflict");
    expect(await getJob(admin, "raced-key")).toMatchObject({ status: "released", released_cents: 2_500, recovery: { dispatch_accepted: false } });
    expect(await credits(admin)).toMatchObject({ held_cents: 0, available_cents: 10_000 });
    expect((await getRequest(admin, requestId)).label).toBe("source_review");
  });

  it("a malformed job id or body is 400 invalid_request naming the field", async () => {
    const { admin, requestId } = await readyToBuild();
    const badKey = await dispatchBuild(admin, requestId, "has space");
    expect(badKey.status).toBe(400);
    expect(badKey.body.error).toMatchObject({ code: "invalid_request", field: "Idempotency-Key" });
    const badBody = await dispatchBuild(admin, requestId, "ok-id", { usd: 5 });
    expect(badBody.body.error).toMatchObject({ code: "invalid_request", field: "body" });
    const badPlan = await call("PUT", `/v1/build-requests/${requestId}/plan`, { token: admin, body: plan({ pinned_commit: "main" }) });
    expect(badPlan.body.error).toMatchObject({ code: "invalid_request", field: "pinned_commit" });
    const badProject = await call("POST", "/v1/projects", { token: admin, body: { name: "x", source_url: "https://gitlab.com/a/b", launch: { command: ["x"] } } });
    expect(badProject.body.error).toMatchObject({ code: "invalid_request", field: "source_url" });
    expect(await credits(admin)).toMatchObject({ held_cents: 0 });
  });
});

describe("a dispatch that cannot be confirmed", () => {
  it("leaves the reservation held and answers 202; reconciliation then ends dispatched, exactly once", async () => {
    const { admin, requestId, runner } = await readyToBuild();
    const unreachable = runObjectUnreachable();
    const res = await dispatchBuild(admin, requestId, "flaky");
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ status: "dispatch_unconfirmed", reserved_cents: 2_500, run_id: null, recovery: { dispatch_accepted: null, reservation_held: true } });
    expect(res.body.message).toMatch(/reservation stays held.*reconciled/);
    expect(res.body.dispatch.last_error).toContain("Network connection lost");
    expect(await credits(admin)).toMatchObject({ held_cents: 2_500, available_cents: 7_500 });
    expect((await getRequest(admin, requestId)).label).toBe("queued");
    expect(await runCount(admin)).toBe(0);

    // Still unreachable: reconciliation keeps it held.
    const still = await call("POST", "/v1/build-jobs/flaky/reconcile", { token: admin, body: {} });
    expect(still.status).toBe(202);
    expect(still.body.outcome).toBe("unconfirmed");
    expect((await credits(admin)).held_cents).toBe(2_500);

    unreachable.mockRestore();
    const reconciled = await call("POST", "/v1/build-jobs/flaky/reconcile", { token: admin, body: {} });
    expect(reconciled.status).toBe(200);
    expect(reconciled.body.outcome).toBe("dispatched");
    expect(reconciled.body.job).toMatchObject({ status: "queued", recovery: { dispatch_accepted: true } });
    // Reconciling again, or releasing now, changes nothing: the run exists.
    const release = await call("POST", "/v1/build-jobs/flaky/reconcile", { token: admin, body: { action: "release" } });
    expect(release.body).toMatchObject({ outcome: "in_progress", job: { status: "queued" } });
    expect(await runCount(admin)).toBe(1);
    expect((await credits(admin)).held_cents).toBe(2_500);

    await runToEnd(runner!.token, reconciled.body.job.run_id, finalReport(600));
    expect(await waitForJob(admin, "flaky", (j) => j.status === "settled")).toMatchObject({ settled_cents: 600, released_cents: 1_900 });
  });

  it("reconciliation releases the reservation when no run was created, after the dispatch timeout, exactly once", async () => {
    const { admin, orgId, requestId } = await readyToBuild();
    runObjectUnreachable();
    expect((await dispatchBuild(admin, requestId, "lost")).status).toBe(202);
    vi.restoreAllMocks();

    // A member cannot release credit; an admin cannot release a dispatch that may still be in flight.
    const member = await call("POST", "/v1/tokens", { token: admin, body: { kind: "member" } });
    expect((await call("POST", "/v1/build-jobs/lost/reconcile", { token: member.body.token, body: { action: "release" } })).status).toBe(403);
    const early = await call("POST", "/v1/build-jobs/lost/reconcile", { token: admin, body: { action: "release" } });
    expect(early.status).toBe(409);
    expect(early.body.error.code).toBe("dispatch_in_flight");
    expect((await credits(admin)).held_cents).toBe(2_500);

    await ageDispatch(orgId, "lost", 60_000);
    const released = await call("POST", "/v1/build-jobs/lost/reconcile", { token: admin, body: { action: "release" } });
    expect(released.status).toBe(200);
    expect(released.body).toMatchObject({ outcome: "released", job: { status: "released", released_cents: 2_500, recovery: { dispatch_accepted: false } } });
    expect(await credits(admin)).toMatchObject({ held_cents: 0, available_cents: 10_000, spent_cents: 0 });
    expect((await getRequest(admin, requestId)).label).toBe("source_review");

    // The same job id again replays the released job: no run is created, nothing is reserved again.
    const replay = await dispatchBuild(admin, requestId, "lost");
    expect(replay.status).toBe(200);
    expect(replay.body.status).toBe("released");
    const twice = await call("POST", "/v1/build-jobs/lost/reconcile", { token: admin, body: { action: "release" } });
    expect(twice.body.outcome).toBe("released");
    expect(await runCount(admin)).toBe(0);
    expect((await credits(admin)).entries.filter((e: any) => e.kind === "release")).toHaveLength(1);
    // A new job for the request can be dispatched now.
    expect((await dispatchBuild(admin, requestId, "lost-2")).status).toBe(201);
  });

  it("when the run was created but the answer was lost, reconciliation finds it and never releases", async () => {
    const { admin, orgId, requestId } = await readyToBuild();
    const real = runEngine.dispatch;
    vi.spyOn(runEngine, "dispatch").mockImplementationOnce(async (...args) => {
      await real(...args);
      throw new Error("The Durable Object's answer was lost.");
    });
    expect((await dispatchBuild(admin, requestId, "answer-lost")).status).toBe(202);
    expect(await runCount(admin)).toBe(1);
    await ageDispatch(orgId, "answer-lost", 60_000);
    const res = await call("POST", "/v1/build-jobs/answer-lost/reconcile", { token: admin, body: { action: "release" } });
    expect(res.body.outcome).toBe("dispatched");
    expect(res.body.job.status).toBe("queued");
    expect((await credits(admin)).held_cents).toBe(2_500);
    expect(await runCount(admin)).toBe(1);
  });

  it("repeating the dispatch with the same Idempotency-Key retries it; the run is created once", async () => {
    const { admin, requestId } = await readyToBuild();
    const unreachable = runObjectUnreachable();
    expect((await dispatchBuild(admin, requestId, "retry-me")).status).toBe(202);
    expect((await dispatchBuild(admin, requestId, "retry-me")).status).toBe(202);
    unreachable.mockRestore();
    const retried = await dispatchBuild(admin, requestId, "retry-me");
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ status: "queued", dispatch: { attempts: 3 } });
    expect((await dispatchBuild(admin, requestId, "retry-me")).body.run_id).toBe(retried.body.run_id);
    expect(await runCount(admin)).toBe(1);
  });

  it("a run that finishes before its dispatch was confirmed still settles once", async () => {
    const { admin, requestId, runner } = await readyToBuild();
    const real = runEngine.dispatch;
    let runId = "";
    vi.spyOn(runEngine, "dispatch").mockImplementationOnce(async (...args) => {
      runId = (await real(...args)).id;
      throw new Error("timed out");
    });
    expect((await dispatchBuild(admin, requestId, "fast")).status).toBe(202);
    await runToEnd(runner!.token, runId, finalReport(300));
    const job = await waitForJob(admin, "fast", (j) => j.status === "settled");
    expect(job).toMatchObject({ run_id: runId, settled_cents: 300, released_cents: 2_200 });
    const reconcile = await call("POST", "/v1/build-jobs/fast/reconcile", { token: admin, body: {} });
    expect(reconcile.body.outcome).toBe("settled");
    expect((await credits(admin)).spent_cents).toBe(300);
  });
});

describe("the reconciliation sweep", () => {
  it("retries an unconfirmed dispatch once the dispatch timeout passed, keeps it held while it fails, and never releases", async () => {
    const { admin, orgId, requestId } = await readyToBuild();
    const config = loadConfig(env);
    const unreachable = runObjectUnreachable();
    expect((await dispatchBuild(admin, requestId, "swept")).status).toBe(202);
    expect((await reconcileUnconfirmedJobs(env, config)).outcomes[`${orgId}/swept`]).toBeUndefined();

    await ageDispatch(orgId, "swept", 60_000);
    expect((await reconcileUnconfirmedJobs(env, config)).outcomes[`${orgId}/swept`]).toBe("unconfirmed");
    expect((await getJob(admin, "swept")).dispatch.attempts).toBe(2);
    expect((await credits(admin)).held_cents).toBe(2_500);

    unreachable.mockRestore();
    await ageDispatch(orgId, "swept", 60_000);
    expect((await reconcileUnconfirmedJobs(env, config)).outcomes[`${orgId}/swept`]).toBe("dispatched");
    expect(await getJob(admin, "swept")).toMatchObject({ status: "queued", recovery: { dispatch_accepted: true, reservation_held: true } });
    expect(await runCount(admin)).toBe(1);
    expect((await credits(admin)).held_cents).toBe(2_500);
  });
  it("settles a job whose run ended while its terminal event's side effects were lost, once the dispatch timeout passed", async () => {
    const { admin, orgId, requestId, runner } = await readyToBuild();
    const config = loadConfig(env);
    const effects = EVENT_EFFECTS.splice(0); // every side effect of the run's events is lost
    let runId: string;
    try {
      runId = (await dispatchBuild(admin, requestId, "lost-end")).body.run_id;
      await runToEnd(runner!.token, runId, finalReport(400));
      expect((await getRun(admin, runId)).state).toBe("completed");
      // The run's terminal event reached the consumer, which stored it and did nothing else.
      await vi.waitFor(
        async () => {
          const row = await env.DB.prepare("SELECT seq FROM events WHERE run_id = ? AND type = 'run.state' AND data LIKE '%\"to\":\"completed\"%'").bind(runId).first();
          expect(row).not.toBeNull();
        },
        { timeout: 20_000, interval: 50 },
      );
    } finally {
      EVENT_EFFECTS.push(...effects);
    }
    expect(await getJob(admin, "lost-end")).toMatchObject({ status: "queued" });
    expect((await settleEndedJobs(env, config)).outcomes[`${orgId}/lost-end`]).toBeUndefined();

    await env.DB.prepare("UPDATE runs SET updated_at_ms = updated_at_ms - ? WHERE id = ?").bind(config.buildDispatchTimeoutMs, runId).run();
    expect((await settleEndedJobs(env, config)).outcomes[`${orgId}/lost-end`]).toBe("settled");
    expect(await getJob(admin, "lost-end")).toMatchObject({ status: "settled", settled_cents: 400, released_cents: 2_100 });
    expect(await credits(admin)).toMatchObject({ spent_cents: 400, held_cents: 0 });
    expect((await settleEndedJobs(env, config)).outcomes[`${orgId}/lost-end`]).toBeUndefined();
  });
});

describe("recovery: find a job by id", () => {
  it("GET /v1/build-jobs/:id shows whether dispatch was accepted, cost charged and an artifact exists, with the run and entries", async () => {
    const { admin, requestId, runner } = await readyToBuild();
    const job = (await dispatchBuild(admin, requestId, "find-me")).body;
    const queued = await getJob(admin, "find-me");
    expect(queued).toMatchObject({
      recovery: { dispatch_accepted: true, reservation_held: true, cost_charged: false, artifact_exists: false },
      run: { id: job.run_id, state: "queued" },
    });
    await runToEnd(runner!.token, job.run_id, finalReport(250));
    const done = await waitForJob(admin, "find-me", (j) => j.status === "settled");
    expect(done.recovery).toMatchObject({ dispatch_accepted: true, reservation_held: false, cost_charged: true, charged_cents: 250, artifact_exists: true, next_action: "none" });
    expect(done.run).toMatchObject({ state: "completed", cost_cents: 250 });
    const listed = await call("GET", `/v1/build-jobs?request_id=${requestId}`, { token: admin });
    expect(listed.body.jobs.map((j: any) => j.id)).toEqual(["find-me"]);
  });
});
