// Crash-safe publication (../shared/spec/run-lifecycle.md, "Completion and recovery"): an autopilot
// run's verified outcome goes publishing with its intent stored first; the runner gets a push
// credential and reports its push; Docket verifies the branch, finds the branch's pull request
// before ever creating one, and completes the run only with the PR stored.
//
// What is real: admission (the project store, the rules, the ticket), the run object, the routes.
// What stands in: GitHub, unreachable inside the Workers pool: the tracker and the code host are
// in-memory (test/workers/autopilot-fakes.ts, FakeHost below); test/e2e/scenario-publication.test.mjs
// runs the real GitHub client against the fake GitHub server and a real bare repository.

import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config";
import { sha256Hex } from "../../src/lib/crypto";
import { recoverPublications } from "../../src/publication-recovery";
import { admitReadyIssue, createProject, FakeHost, installRealAutopilotWithTracker, type RealProject } from "./autopilot-fakes";
import { ageRun, attemptCall, editStoredRun, call, claim, createOrg, dispatch, getRun, registerRunner, report, runAlarm, runStub } from "./helpers";
import { waitFor } from "./events-helpers";

const config = loadConfig(env as unknown as Record<string, unknown>);
const fake = installRealAutopilotWithTracker();
const PATCH = "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-comit\n+commit\n";
const SHA = "a".repeat(40);

const hosts = new Map<string, FakeHost>();
fake.deps.publisher = (project) => {
  if (!hosts.has(project.id)) hosts.set(project.id, new FakeHost());
  return hosts.get(project.id)!;
};

let org: { orgId: string; admin: string };
let project: RealProject;
let host: FakeHost;
let nextNumber = 500;

beforeEach(async () => {
  org = await createOrg("publication");
  project = await createProject(org.admin);
  host = fake.deps.publisher!(project, project.secrets, config) as FakeHost;
});

/** An issue admitted as a person would: a fresh ready-labeled issue through the real admission. */
async function admit(): Promise<string> {
  return admitReadyIssue(fake, project.id, nextNumber++);
}

/** Claims `runId` with a fresh runner and launches it. */
async function claimRun(runId: string, opts: { launch?: boolean } = {}) {
  const runner = await registerRunner(org.admin);
  const res = await claim(runner.token);
  expect(res.status).toBe(200);
  expect(res.body.run_id).toBe(runId);
  if (opts.launch !== false) expect((await attemptCall(runner.token, runId, res.body.attempt, "launched", { sandbox_id: "sbx-1" })).status).toBe(200);
  return { runner, grant: res.body as Record<string, any> };
}

async function finish(runId: string, attemptToken: string, patch = PATCH) {
  const res = await report(attemptToken, runId, {
    seq: 1,
    final: { outcome: "completed", exit_codes: { agent: 0 }, artifact: { patch, source_revision: "b".repeat(40), model: "m", limitations: [] }, cost_cents: 3 },
  });
  expect(res.status).toBe(200);
  return res.body;
}

/** An admitted run, claimed, finished and so publishing, with its runner. */
async function publishing() {
  const runId = await admit();
  const { runner, grant } = await claimRun(runId);
  const answer = await finish(runId, grant.attempt_token);
  expect(answer.state).toBe("publishing");
  return { runId, runner, attempt: grant.attempt as number };
}

/**
 * Publishing and pushed: the branch is on the host at `head`. The run's alarm takes the PR step on
 * its own from here, so a test sets the host's faults up before.
 */
async function pushed(head = SHA) {
  const p = await publishing();
  host.branches.set(`docket/${p.runId}`, head);
  const res = await attemptCall(p.runner.token, p.runId, p.attempt, "pushed", { branch: `docket/${p.runId}`, head_sha: SHA });
  expect(res.status).toBe(200);
  // The push is answered before any PR step: the request itself never asks the host for the PR.
  expect(res.body.state).toBe("publishing");
  return p;
}

async function events(runId: string) {
  const res = await call("GET", `/v1/runs/${runId}/events?limit=1000`, { token: org.admin });
  return res.body.events as { type: string; data: Record<string, any> }[];
}

/**
 * The first PR step after a push: the run's alarm, armed for now by the push, may already be
 * running on its own; run it (if it is not) and wait until the step's result is stored.
 */
async function firstStep(runId: string) {
  await runAlarm(runId);
  for (let i = 0; i < 200; i++) {
    const p = (await getRun(org.admin, runId)).publication;
    if (p.tries > 0 || p.pr || (await getRun(org.admin, runId)).state !== "publishing") return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`the PR step of ${runId} never finished`);
}

/** Makes the run's next PR try due now, as if PUBLICATION_RETRY_MS had passed. */
async function makeDue(runId: string) {
  await editStoredRun(runId, (run) => {
    if (run.publication) run.publication.nextTryAtMs = Date.now() - 1;
  });
}

/** The next PR try, due now, taken by the run's alarm. */
async function nextTry(runId: string) {
  await makeDue(runId);
  await runAlarm(runId);
}

/** Pushed, with the host unreachable for the first try; `setUp` then shapes the host before the next. */
async function pushedThen(setUp: (runId: string) => void) {
  host.failReads = true;
  const p = await pushed();
  await firstStep(p.runId);
  setUp(p.runId);
  host.failReads = false;
  await makeDue(p.runId);
  return p;
}

describe("publication intent", () => {
  it("an autopilot run's completed outcome with a patch goes publishing, its intent stored before any side effect", async () => {
    const { runId, attempt } = await publishing();
    const run = await getRun(org.admin, runId);
    expect(run.state).toBe("publishing");
    expect(run.publication).toMatchObject({
      branch: `docket/${runId}`,
      source_revision: "b".repeat(40),
      patch_digest: await sha256Hex(PATCH),
      head_sha: null,
      pushed_at_ms: null,
      pr: null,
    });
    expect(run.publication.intent_at_ms).toBeGreaterThan(0);
    expect(host.calls).toEqual([]);
    const intent = (await events(runId)).find((e) => e.type === "run.publication");
    expect(intent?.data).toMatchObject({ step: "intent", branch: `docket/${runId}`, attempt });
  });

  it("a run without a ticket completes as before; an autopilot run with an empty patch is never published and fails, not completed without a PR", async () => {
    const runner = await registerRunner(org.admin);
    const plain = await dispatch(org.admin);
    const grant = (await claim(runner.token)).body;
    expect(grant.run_id).toBe(plain);
    await finish(plain, grant.attempt_token);
    expect(await getRun(org.admin, plain)).toMatchObject({ state: "completed", publication: null });

    const runId = await admit();
    const { grant: g } = await claimRun(runId);
    expect((await finish(runId, g.attempt_token, "  \n")).state).toBe("failed");
    expect(await getRun(org.admin, runId)).toMatchObject({ publication: null, last_error: expect.stringContaining("nothing to publish") });
    expect(host.calls).toEqual([]);
  });

  it("while publishing, the attempt's machine keeps its lease until it reports the push", async () => {
    const { runId, runner, attempt } = await publishing();
    const lease = await attemptCall(runner.token, runId, attempt, "lease");
    expect(lease.status).toBe(200);
    expect(lease.body.state).toBe("publishing");
  });
});

describe("the push credential and the push", () => {
  it("the holding machine gets a token for this one repository, never stored in the run", async () => {
    const { runId, runner, attempt } = await publishing();
    const res = await attemptCall(runner.token, runId, attempt, "push-credential");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ run_id: runId, attempt, token: "ghs_secret_1", branch: `docket/${runId}`, source_revision: "b".repeat(40), patch_digest: await sha256Hex(PATCH) });
    expect(res.body.push_url).toBe("https://github.com/Codertocat/Hello-World");
    expect(host.calls).toEqual(["token Codertocat/Hello-World"]);
    const stored = await runInDurableObject(runStub(runId), (_i, state) => state.storage.sql.exec<{ doc: string }>("SELECT doc FROM run").one().doc);
    expect(stored).not.toContain("ghs_secret");
    expect(JSON.stringify(await events(runId))).not.toContain("ghs_secret");
  });

  it("another machine, a stale attempt, or a run not awaiting a push is refused and changes nothing", async () => {
    const { runId, runner, attempt } = await publishing();
    const other = await registerRunner(org.admin, { name: "other" });
    const before = await getRun(org.admin, runId);
    const asOther = await attemptCall(other.token, runId, attempt, "push-credential");
    expect(asOther.status).toBe(409);
    expect(asOther.body.error.code).toBe("other_machine");
    const otherPushed = await attemptCall(other.token, runId, attempt, "pushed", { branch: `docket/${runId}`, head_sha: SHA });
    expect(otherPushed.body.error.code).toBe("other_machine");
    const stale = await attemptCall(runner.token, runId, attempt + 1, "pushed", { branch: `docket/${runId}`, head_sha: SHA });
    expect(stale.status).toBe(400);
    expect(stale.body.error.code).toBe("invalid_request");
    const wrongBranch = await attemptCall(runner.token, runId, attempt, "pushed", { branch: "main", head_sha: SHA });
    expect(wrongBranch.body.error).toMatchObject({ code: "invalid_request", field: "branch" });
    const badSha = await attemptCall(runner.token, runId, attempt, "pushed", { branch: `docket/${runId}`, head_sha: "HEAD" });
    expect(badSha.body.error.code).toBe("invalid_request");
    expect(await getRun(org.admin, runId)).toEqual(before);
    expect(host.tokens).toBe(0);

    // A run still implementing is not awaiting a push.
    const implementing = await admit();
    const { runner: r2, grant } = await claimRun(implementing);
    const early = await attemptCall(r2.token, implementing, grant.attempt, "push-credential");
    expect(early.status).toBe(409);
    expect(early.body.error.code).toBe("invalid_transition");
  });

  it("a replayed pushed answers the same; after the push the attempt holds nothing more", async () => {
    host.failReads = true; // the PR step cannot finish: the run stays publishing
    const { runId, runner, attempt } = await pushed();
    const again = await attemptCall(runner.token, runId, attempt, "pushed", { branch: `docket/${runId}`, head_sha: SHA });
    expect(again.status).toBe(200);
    const credential = await attemptCall(runner.token, runId, attempt, "push-credential");
    expect(credential.body.error.code).toBe("invalid_transition");
    const run = await getRun(org.admin, runId);
    expect(run.publication).toMatchObject({ head_sha: SHA, pr: null });
    expect(run.publication.pushed_at_ms).toBeGreaterThan(0);
  });
});

describe("a push that failed", () => {
  it("reported stopped by the runner, pauses the publication at its recoverable boundary, never fails the run", async () => {
    const { runId, runner, attempt } = await publishing();
    const res = await attemptCall(runner.token, runId, attempt, "stopped", { reason: "the publication push failed: git push failed: remote rejected" });
    expect(res.status).toBe(200);
    expect(res.body.state).toBe("paused");
    const run = await getRun(org.admin, runId);
    expect(run).toMatchObject({ state: "paused", continuation: "publishing", last_error: null });
    expect(run.publication).toMatchObject({ head_sha: null, pr: null });
    expect(run.steps.at(-1)).toMatchObject({ outcome: "paused" });
    expect(run.steps.at(-1).error).toContain("remote rejected");
  });

  it("a publication paused at its boundary, by its runner, an operator or the reaper, holds no machine, sandbox or lease", async () => {
    const byRunner = await publishing();
    await attemptCall(byRunner.runner.token, byRunner.runId, byRunner.attempt, "stopped", { reason: "git push failed" });
    const byOperator = await publishing();
    expect((await call("POST", `/v1/runs/${byOperator.runId}/pause`, { token: org.admin, body: {} })).status).toBe(200);
    const byReaper = await publishing();
    await ageRun(byReaper.runId, config.leaseTtlMs + 1_000);
    await runAlarm(byReaper.runId);
    for (const { runId, runner, attempt } of [byRunner, byOperator, byReaper]) {
      const run = await getRun(org.admin, runId);
      expect(run).toMatchObject({ state: "paused", continuation: "publishing", machine_id: null, sandbox_id: null, lease_expires_at_ms: null });
      expect(run.steps.at(-1)).toMatchObject({ machine_id: runner.machineId, sandbox_id: "sbx-1", outcome: "paused" });
      // The machine that held it is told the run is paused, not that it still holds it.
      const lease = await attemptCall(runner.token, runId, attempt, "lease");
      expect(lease.body.error).toMatchObject({ code: "invalid_transition" });
    }
  });
});

describe("the pull request step", () => {
  it("finds before it creates, creates one PR, and completes only with the PR stored; the tracker deliveries go out with it", async () => {
    const { runId } = await pushed();
    await firstStep(runId);
    const branch = `docket/${runId}`;
    expect(host.calls).toEqual([`head Codertocat/Hello-World ${branch}`, `find Codertocat/Hello-World ${branch}`, `create Codertocat/Hello-World ${branch}`]);
    const run = await getRun(org.admin, runId);
    expect(run.state).toBe("completed");
    expect(run.publication.pr).toMatchObject({ number: 100, url: "https://github.com/Codertocat/Hello-World/pull/100" });
    expect(run.publication.create_requested_at_ms).toBeGreaterThan(0);
    const deliveries = (await events(runId)).filter((e) => e.type === "run.tracker_delivery").map((e) => e.data);
    expect(deliveries).toHaveLength(2);
    expect(deliveries[0]).toMatchObject({ kind: "review_label", ticket_key: `github:Codertocat/Hello-World#${nextNumber - 1}`, project_id: project.id, pr_url: run.publication.pr.url, pr_number: 100 });
    expect(deliveries[1]).toMatchObject({ kind: "pr_comment", ticket_key: `github:Codertocat/Hello-World#${nextNumber - 1}`, project_id: project.id, pr_url: run.publication.pr.url, pr_number: 100 });
    expect(host.pulls).toHaveLength(1);
  });

  it("a PR that already exists for the branch is adopted, never created again", async () => {
    const { runId } = await pushedThen((id) =>
      host.pulls.push({ repository: "Codertocat/Hello-World", number: 77, url: "https://github.com/Codertocat/Hello-World/pull/77", branch: `docket/${id}`, state: "open" }),
    );
    await runAlarm(runId);
    expect(host.calls.some((c) => c.startsWith("create"))).toBe(false);
    expect((await getRun(org.admin, runId)).publication.pr).toMatchObject({ number: 77 });
  });

  it("422 'already exists' on creation looks the PR up again", async () => {
    host.createMode = ["exists"];
    const { runId } = await pushed();
    await firstStep(runId);
    const run = await getRun(org.admin, runId);
    expect(run.state).toBe("completed");
    expect(run.publication.pr.number).toBe(100);
    expect(host.calls.filter((c) => c.startsWith("find"))).toHaveLength(2);
  });

  it("a crash after creation, before the answer: the next try finds that PR and creates no other", async () => {
    host.createMode = ["crash_after_create"];
    const { runId } = await pushed();
    await firstStep(runId);
    let run = await getRun(org.admin, runId);
    expect(run.state).toBe("publishing");
    expect(run.publication).toMatchObject({ tries: 1, pr: null });
    expect(run.publication.last_error).toContain("connection dropped");
    await nextTry(runId);
    run = await getRun(org.admin, runId);
    expect(run.state).toBe("completed");
    expect(run.publication.pr.number).toBe(100);
    expect(host.pulls).toHaveLength(1);
    expect(host.calls.filter((c) => c.startsWith("create"))).toHaveLength(1);
  });

  it("a branch moved by someone else fails the publication (publish_failed), never publishing what was not verified", async () => {
    const { runId } = await pushed("c".repeat(40));
    await firstStep(runId);
    const run = await getRun(org.admin, runId);
    expect(run.state).toBe("failed");
    expect(run.last_error).toContain("publish_failed");
    expect(run.publication.pr).toBeNull();
    expect(host.calls.some((c) => c.startsWith("create") || c.startsWith("find"))).toBe(false);
  });

  it("the PR step's retries are bounded: PUBLICATION_TRIES_MAX failed tries end the run failed with the reason", async () => {
    host.failReads = true;
    const { runId } = await pushed();
    await firstStep(runId);
    for (let i = 1; i < config.publicationTriesMax; i++) {
      expect((await getRun(org.admin, runId)).publication.tries).toBe(i);
      await nextTry(runId);
    }
    const run = await getRun(org.admin, runId);
    expect(run.state).toBe("failed");
    expect(run.last_error).toBe(`publish_failed: GitHub answered 503 (after ${config.publicationTriesMax} tries)`);
    expect(host.pulls).toHaveLength(0);
  });
});

describe("publication recovery", () => {
  it("a publishing run whose push never came pauses at its recoverable boundary once its lease is gone", async () => {
    const { runId } = await publishing();
    await ageRun(runId, config.leaseTtlMs + 1_000);
    await recoverPublications(env, config, 0);
    const run = await getRun(org.admin, runId);
    expect(run).toMatchObject({ state: "paused", continuation: "publishing" });
    const hop = (await events(runId)).filter((e) => e.type === "run.state").at(-1)!;
    expect(hop.data.reason).toContain("publish_interrupted");
  });

  it("a publishing run with a pushed branch and no stored PR adopts the PR recovery finds", async () => {
    const { runId } = await pushedThen((id) =>
      host.pulls.push({ repository: "Codertocat/Hello-World", number: 55, url: "https://github.com/Codertocat/Hello-World/pull/55", branch: `docket/${id}`, state: "open" }),
    );
    await recoverPublications(env, config, 0);
    const run = await getRun(org.admin, runId);
    expect(run.state).toBe("completed");
    expect(run.publication.pr.number).toBe(55);
    expect(host.calls.some((c) => c.startsWith("create"))).toBe(false);
  });

  it("a resumed publication whose branch is pushed goes to the PR step with no runner and no coding turn", async () => {
    host.failReads = true;
    const { runId } = await pushed();
    await firstStep(runId);
    // Paused after the push, before the PR: then resumed.
    expect(await runStub(runId).control(org.orgId, { type: "publish_interrupted", reason: "publish_interrupted: operator pause" })).toMatchObject({ state: "paused", continuation: "publishing" });
    host.failReads = false;
    expect(await runStub(runId).control(org.orgId, { type: "resume" } as never)).toMatchObject({ state: "queued", continuation: "publishing" });
    const runner = await registerRunner(org.admin, { name: "idle" });
    expect((await claim(runner.token)).status).toBe(204);
    await recoverPublications(env, config, 0);
    const run = await getRun(org.admin, runId);
    expect(run.state).toBe("completed");
    expect(run.attempt).toBe(1);
    expect(run.steps).toHaveLength(1);
    expect(host.pulls).toHaveLength(1);
  });

  it("a resumed publication without a push is claimed as a push-only job carrying the stored patch", async () => {
    const { runId } = await publishing();
    await ageRun(runId, config.leaseTtlMs + 1_000);
    await runAlarm(runId);
    expect((await getRun(org.admin, runId)).state).toBe("paused");
    await runStub(runId).control(org.orgId, { type: "resume" } as never);
    const runner = await registerRunner(org.admin, { name: "pusher" });
    const res = await claim(runner.token);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ run_id: runId, attempt: 2, publication: { branch: `docket/${runId}`, source_revision: "b".repeat(40), patch: PATCH } });
    expect((await getRun(org.admin, runId)).state).toBe("publishing");
    // The first attempt's calls are stale now, whoever makes them.
    const stale = await attemptCall(runner.token, runId, 1, "push-credential");
    expect(stale.body.error).toMatchObject({ code: "stale_attempt", current_attempt: 2 });
    const stalePushed = await attemptCall(runner.token, runId, 1, "pushed", { branch: `docket/${runId}`, head_sha: SHA });
    expect(stalePushed.body.error.code).toBe("stale_attempt");
    const credential = await attemptCall(runner.token, runId, 2, "push-credential");
    expect(credential.status).toBe(200);
    host.branches.set(`docket/${runId}`, SHA);
    expect((await attemptCall(runner.token, runId, 2, "pushed", { branch: `docket/${runId}`, head_sha: SHA })).status).toBe(200);
    await firstStep(runId);
    expect((await getRun(org.admin, runId)).state).toBe("completed");
  });
});

describe("what a published pull request costs on GitHub", () => {
  it("from the push credential to the issue's comment a publication makes 8 GitHub requests: the first comment is posted without reading the issue's comments first", async () => {
    const { runId, runner, attempt } = await publishing();
    expect((await attemptCall(runner.token, runId, attempt, "push-credential")).status).toBe(200);
    host.branches.set(`docket/${runId}`, SHA);
    expect((await attemptCall(runner.token, runId, attempt, "pushed", { branch: `docket/${runId}`, head_sha: SHA })).status).toBe(200);
    await firstStep(runId);
    await waitFor("both tracker deliveries", async () => {
      const listed = (await call("GET", `/v1/runs/${runId}/deliveries`, { token: org.admin })).body.deliveries as { status: string }[];
      return listed.length === 2 && listed.every((d) => d.status === "delivered") ? listed : undefined;
    });
    // On GitHub: the push token, the branch's ref, the PR lookup, the repository's default branch and
    // the PR's creation (createPullRequest), the label off and on (moveLabels), and the comment: 8.
    expect(host.calls.map((c) => c.split(" ")[0])).toEqual(["token", "head", "find", "create"]);
    expect(fake.tracker(project.id).calls).toEqual({ post: 1, find: 0, labels: 1 });
  });
});
