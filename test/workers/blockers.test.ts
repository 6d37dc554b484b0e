// Blockers and tracker deliveries (../shared/spec/run-lifecycle.md, "Blocker and failure";
// docs/protocol.md, "Blockers", "Tracker deliveries"): the daemon's blocked outcome stops the run
// with its structured blocker; an autopilot run's blocker reaches the issue as one comment with a
// receipt, retried without ever touching the run; only a new human readiness generation requeues it.
//
// What is real: the runner protocol, the run objects, the outbox, the Queue and its consumer, the
// D1 receipts, the projects store, the TicketObject and the admission rules. What stands in:
// GitHub only, as the in-memory tracker of test/workers/autopilot-fakes.ts.

import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { handleDelivery, type AutopilotMessage } from "../../src/autopilot/queue";
import { reconcileProject } from "../../src/autopilot/reconcile";
import { loadConfig } from "../../src/config";
import { requestTrackerDelivery } from "../../src/tracker/deliver";
import { TRACKER_DELIVERY_EVENT } from "../../src/run/ticket-requests";
import { deliveryMarker } from "../../src/tracker/requests";
import { waitFor } from "./events-helpers";
import { attemptCall, call, claim, createOrg, dispatch, getRun, registerRunner, report } from "./helpers";
import { briefBody, createProject, example, installRealAutopilotWithTracker, type FakeTracker, type RealProject } from "./autopilot-fakes";

type Json = Record<string, any>;

const config = loadConfig(env as unknown as Record<string, unknown>);
const fake = installRealAutopilotWithTracker();

const BLOCKER = {
  summary: "The cache needs a database and the repository configures two.",
  evidence: ["config/cache.yml names postgres", "config/test.yml names sqlite"],
  questions: ["Should the cache use Postgres or SQLite?"],
  human_action: "Answer on the issue, then remove and add the ready label again.",
};

/** Ticket numbers are global (one TicketObject per issue): each test takes its own. */
let nextNumber = 5_000;

interface Setup {
  org: { orgId: string; admin: string };
  project: RealProject;
  tracker: FakeTracker;
  runner: { machineId: string; token: string };
}

/** An organization of its own (claims hand out only its runs), its project, its tracker and a runner. */
async function setup(name: string): Promise<Setup> {
  const org = await createOrg(name);
  const project = await createProject(org.admin);
  return { org, project, tracker: fake.tracker(project.id), runner: await registerRunner(org.admin) };
}

/** A person adds the ready label to issue `number` now: a new readiness generation. */
function labeled(s: Setup, number: number, sender?: Json) {
  const payload = example("issues", "labeled");
  payload.issue.number = number;
  payload.issue.body = briefBody(payload.issue.body);
  if (sender) payload.sender = { ...payload.sender, ...sender };
  const issue = s.tracker.fromPayload(payload);
  issue.transition = { ...issue.transition!, atMs: Date.now(), actor: { login: payload.sender.login, type: payload.sender.type, viaApp: null } };
  return payload;
}

function message(s: Setup, payload: Json, event = "issues"): AutopilotMessage {
  const ready = event === "issues" && payload.action === "labeled" && payload.label?.name === s.project.readyLabel;
  return {
    kind: "autopilot.delivery",
    project_id: s.project.id,
    number: payload.issue.number,
    delivery_id: crypto.randomUUID(),
    event,
    action: payload.action,
    sender: ready ? { login: payload.sender.login, type: payload.sender.type, viaApp: null } : null,
  };
}

/** Admits issue `number` through the webhook's handler; answers the run's id. */
async function admit(s: Setup, number: number): Promise<string> {
  const answer = await handleDelivery(env, config, fake.deps, message(s, labeled(s, number)));
  expect(answer?.outcome).toBe("admitted");
  return answer!.runId!;
}

/** Claims and launches the org's next run; answers the attempt's token and number. */
async function start(s: Setup, runId: string) {
  const granted = await claim(s.runner.token);
  expect(granted.status).toBe(200);
  expect(granted.body.run_id).toBe(runId);
  const attempt = granted.body.attempt as number;
  expect((await attemptCall(s.runner.token, runId, attempt, "launched", { sandbox_id: `sbx-${attempt}` })).status).toBe(200);
  return { token: granted.body.attempt_token as string, attempt };
}

function blockedReport(token: string, runId: string, seq = 1, blocker: Json = BLOCKER) {
  return report(token, runId, { seq, final: { outcome: "blocked", exit_codes: { agent: 0 }, blocker } });
}

async function deliveries(admin: string, runId: string): Promise<Json[]> {
  const res = await call("GET", `/v1/runs/${runId}/deliveries`, { token: admin });
  expect(res.status).toBe(200);
  return res.body.deliveries;
}

const deliveryReaches = (admin: string, runId: string, status: string) =>
  waitFor(`the blocker comment to be ${status}`, async () => (await deliveries(admin, runId)).find((d) => d.kind === "blocker_comment" && d.status === status));

async function events(admin: string, runId: string): Promise<Json[]> {
  const res = await call("GET", `/v1/runs/${runId}/events?limit=1000`, { token: admin });
  expect(res.status).toBe(200);
  return res.body.events;
}

describe("the daemon's blocked outcome", () => {
  it("a blocked final report stops the run with the structured blocker, ends the step and frees the attempt; a plain run gets no tracker delivery", async () => {
    const { admin } = await createOrg("blocked-plain");
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    const granted = await claim(runner.token);
    await attemptCall(runner.token, runId, 1, "launched", { sandbox_id: "sbx-1" });
    const before = Date.now();
    const res = await blockedReport(granted.body.attempt_token, runId);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ state: "blocked", attempt: 1, lease_expires_at_ms: null });

    const run = await getRun(admin, runId);
    expect(run.state).toBe("blocked");
    expect(run.blocker).toEqual({ ...BLOCKER, attempt: 1, at_ms: expect.any(Number) });
    expect(run.blocker.at_ms).toBeGreaterThanOrEqual(before);
    expect(run.steps).toHaveLength(1);
    expect(run.steps[0]).toMatchObject({ outcome: "blocked", error: BLOCKER.summary, ended_at_ms: expect.any(Number) });
    // Execution stopped: the machine no longer holds the attempt, and no runner is handed the run.
    const lease = await attemptCall(runner.token, runId, 1, "lease");
    expect(lease.status).toBe(409);
    expect(lease.body.error).toMatchObject({ code: "invalid_transition", state: "blocked" });
    expect((await claim(runner.token)).status).toBe(204);
    // A run without a ticket keeps its blocker on the run only.
    expect(await deliveries(admin, runId)).toEqual([]);
    const types = (await events(admin, runId)).map((e) => e.type);
    expect(types).not.toContain("run.tracker_delivery");
    expect((await events(admin, runId)).filter((e) => e.type === "run.state").at(-1)!.data).toMatchObject({ from: "implementing", to: "blocked" });
  });

  it("a pending stop outranks the blocker: the run ends cancelled", async () => {
    const { admin } = await createOrg("blocked-stop");
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    const granted = await claim(runner.token);
    await attemptCall(runner.token, runId, 1, "launched", { sandbox_id: "sbx-1" });
    expect((await call("POST", `/v1/runs/${runId}/cancel`, { token: admin, body: {} })).status).toBe(202);
    const res = await blockedReport(granted.body.attempt_token, runId);
    expect(res.status).toBe(200);
    const run = await getRun(admin, runId);
    expect(run.state).toBe("cancelled");
    expect(run.blocker).toBeNull();
  });

  it("a blocked outcome without a blocker, a blocker with another outcome, or one over its bounds is refused and changes nothing", async () => {
    const { admin } = await createOrg("blocked-bad");
    const runner = await registerRunner(admin);
    const runId = await dispatch(admin);
    const granted = await claim(runner.token);
    await attemptCall(runner.token, runId, 1, "launched", { sandbox_id: "sbx-1" });
    const before = await getRun(admin, runId);
    const token = granted.body.attempt_token;
    const missing = await report(token, runId, { final: { outcome: "blocked", exit_codes: { agent: 0 } } });
    expect(missing.status).toBe(400);
    expect(missing.body.error.code).toBe("invalid_request");
    const mixed = await report(token, runId, { final: { outcome: "completed", blocker: BLOCKER } });
    expect(mixed.status).toBe(400);
    const noAction = await report(token, runId, { final: { outcome: "blocked", blocker: { ...BLOCKER, human_action: "" } } });
    expect(noAction.status).toBe(400);
    const tooMany = await blockedReport(token, runId, 1, { ...BLOCKER, questions: Array.from({ length: config.blockerItemsMax + 1 }, (_, i) => `q${i}?`) });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.error).toMatchObject({ code: "invalid_request", field: "final.blocker.questions", max: config.blockerItemsMax });
    const tooLong = await blockedReport(token, runId, 1, { ...BLOCKER, summary: "x".repeat(config.blockerTextMaxChars + 1) });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.error).toMatchObject({ field: "final.blocker.summary", max: config.blockerTextMaxChars });
    expect(await getRun(admin, runId)).toEqual(before);
  });
});

describe("the failure comment on the issue", () => {
  it("an autopilot run that fails says why on its issue, once, and a plain run asks for nothing", async () => {
    const s = await setup("failure-comment");
    const number = nextNumber++;
    const runId = await admit(s, number);
    const { token } = await start(s, runId);
    const failed = await report(token, runId, { final: { outcome: "failed", error: "the tests did not pass", exit_codes: { agent: 1 } } });
    expect(failed.status).toBe(200);
    expect(failed.body.state).toBe("failed");

    const delivered = await waitFor("the failure comment to be delivered", async () =>
      (await deliveries(s.org.admin, runId)).find((d) => d.kind === "failure_comment" && d.status === "delivered"));
    const comments = s.tracker.comments.get(number) ?? [];
    expect(comments).toHaveLength(1);
    expect(comments[0].body).toContain(`Docket run ${runId} failed.`);
    expect(comments[0].body).toContain("the tests did not pass");
    expect(comments[0].body).toContain("removes and adds the ready label");
    expect(comments[0].body).toContain(deliveryMarker(runId, "failure_comment"));
    expect(delivered.receipt).toEqual({ comment_id: comments[0].id, url: comments[0].url });

    const plain = await dispatch(s.org.admin);
    await call("POST", `/v1/runs/${plain}/cancel`, { token: s.org.admin, body: {} });
    expect(await deliveries(s.org.admin, plain)).toEqual([]);
  });
});

describe("the blocker comment on the issue", () => {
  it("is delivered once with its receipt, and a redelivered event never posts it again", async () => {
    const s = await setup("deliver-once");
    const number = nextNumber++;
    const runId = await admit(s, number);
    const { token } = await start(s, runId);
    expect((await blockedReport(token, runId)).status).toBe(200);

    const delivered = await deliveryReaches(s.org.admin, runId, "delivered");
    const comments = s.tracker.comments.get(number) ?? [];
    expect(comments).toHaveLength(1);
    for (const text of [BLOCKER.summary, ...BLOCKER.evidence, ...BLOCKER.questions, BLOCKER.human_action, deliveryMarker(runId, "blocker_comment")]) {
      expect(comments[0].body).toContain(text);
    }
    expect(delivered).toMatchObject({
      kind: "blocker_comment",
      ticket_key: `github:${s.project.repository}#${number}`,
      project_id: s.project.id,
      tries: 1,
      max_tries: config.trackerDeliveryMaxAttempts,
      last_error: null,
      receipt: { comment_id: comments[0].id, url: comments[0].url },
    });
    expect(delivered.delivered_at_ms).toBeGreaterThanOrEqual(delivered.created_at_ms);
    const event = (await events(s.org.admin, runId)).find((e) => e.type === "run.tracker_delivery");
    expect(event?.data).toMatchObject({ kind: "blocker_comment", ticket_key: `github:${s.project.repository}#${number}`, project_id: s.project.id });

    // Every event published again: the delivered kind is never sent again.
    const redeliver = await call("POST", `/v1/runs/${runId}/events/redeliver`, { token: s.org.admin, body: { after: 0 } });
    expect(redeliver.status).toBe(202);
    await waitFor("the redelivered events to be consumed", async () => ((await deliveries(s.org.admin, runId))[0].tries === 1 ? true : undefined));
    await new Promise((r) => setTimeout(r, 1_500));
    expect(s.tracker.comments.get(number)).toHaveLength(1);
    expect(s.tracker.calls.post).toBe(1);
    expect(await deliveries(s.org.admin, runId)).toEqual([delivered]);
  });

  it("a failing delivery is retried with backoff and never changes the run", async () => {
    const s = await setup("deliver-retry");
    const number = nextNumber++;
    const runId = await admit(s, number);
    const { token } = await start(s, runId);
    s.tracker.failNext.post = 1;
    expect((await blockedReport(token, runId)).status).toBe(200);
    const blocked = await getRun(s.org.admin, runId);
    const eventsBefore = await events(s.org.admin, runId);

    const pending = await waitFor("the first try to fail", async () => (await deliveries(s.org.admin, runId)).find((d) => d.tries === 1 && d.status === "pending"));
    expect(pending.last_error).toContain("502");
    const delivered = await deliveryReaches(s.org.admin, runId, "delivered");
    expect(delivered).toMatchObject({ tries: 2, last_error: null });
    expect(s.tracker.comments.get(number)).toHaveLength(1);
    // The run is exactly as it was blocked: no event, no change.
    expect(await getRun(s.org.admin, runId)).toEqual(blocked);
    expect(await events(s.org.admin, runId)).toEqual(eventsBefore);
  });

  it("a crash after posting and before the receipt finds the comment by its marker instead of posting twice", async () => {
    const s = await setup("deliver-crash");
    const number = nextNumber++;
    const runId = await admit(s, number);
    const { token } = await start(s, runId);
    s.tracker.failNext.postLost = 1;
    expect((await blockedReport(token, runId)).status).toBe(200);
    const delivered = await deliveryReaches(s.org.admin, runId, "delivered");
    const comments = s.tracker.comments.get(number)!;
    expect(comments).toHaveLength(1);
    expect(s.tracker.calls.post).toBe(1);
    expect(delivered).toMatchObject({ tries: 2, receipt: { comment_id: comments[0].id, url: comments[0].url } });
  });

  it("a delivery whose tries run out is failed, leaves the run blocked, and an operator's retry delivers it", async () => {
    const s = await setup("deliver-fail");
    const number = nextNumber++;
    const runId = await admit(s, number);
    const { token } = await start(s, runId);
    s.tracker.failNext.post = config.trackerDeliveryMaxAttempts;
    expect((await blockedReport(token, runId)).status).toBe(200);
    const blocked = await getRun(s.org.admin, runId);
    const failed = await deliveryReaches(s.org.admin, runId, "failed");
    expect(failed).toMatchObject({ tries: config.trackerDeliveryMaxAttempts, last_error: expect.stringContaining("502"), receipt: null });
    expect(await getRun(s.org.admin, runId)).toEqual(blocked);
    expect(s.tracker.comments.get(number) ?? []).toHaveLength(0);

    // Only an admin retries; an unknown kind is a bad request; a kind never asked for is not found.
    const member = (await call("POST", "/v1/tokens", { token: s.org.admin, body: { kind: "member", role: "member" } })).body.token;
    const denied = await call("POST", `/v1/runs/${runId}/deliveries/blocker_comment/retry`, { token: member, body: {} });
    expect(denied.status).toBe(403);
    expect((await call("GET", `/v1/runs/${runId}/deliveries`, { token: member })).status).toBe(200);
    expect((await call("POST", `/v1/runs/${runId}/deliveries/nonsense/retry`, { token: s.org.admin, body: {} })).status).toBe(400);
    const never = await call("POST", `/v1/runs/${runId}/deliveries/pr_comment/retry`, { token: s.org.admin, body: {} });
    expect(never.status).toBe(404);
    expect(never.body.error.code).toBe("not_found");

    const retried = await call("POST", `/v1/runs/${runId}/deliveries/blocker_comment/retry`, { token: s.org.admin, body: {} });
    expect(retried.status).toBe(202);
    expect(retried.body.delivery).toMatchObject({ kind: "blocker_comment", status: "pending", tries: 0 });
    const delivered = await deliveryReaches(s.org.admin, runId, "delivered");
    expect(delivered.tries).toBe(1);
    expect(s.tracker.comments.get(number)).toHaveLength(1);
    expect(await getRun(s.org.admin, runId)).toEqual(blocked);
    const again = await call("POST", `/v1/runs/${runId}/deliveries/blocker_comment/retry`, { token: s.org.admin, body: {} });
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({ code: "invalid_transition", status: "delivered" });
  });

  it("another organization neither sees nor retries a run's deliveries", async () => {
    const s = await setup("deliver-owner");
    const runId = await admit(s, nextNumber++);
    const other = await createOrg("deliver-other");
    expect((await call("GET", `/v1/runs/${runId}/deliveries`, { token: other.admin })).status).toBe(404);
    expect((await call("POST", `/v1/runs/${runId}/deliveries/blocker_comment/retry`, { token: other.admin, body: {} })).status).toBe(404);
  });
});

describe("the publication deliveries (asked for by a published run)", () => {
  /** The outbox event a published run emits, handled as the consumer handles it. */
  async function ask(s: Setup, runId: string, number: number, seq: number, data: Json) {
    await requestTrackerDelivery(env, {
      run_id: runId,
      org_id: s.org.orgId,
      seq,
      attempt: 1,
      type: TRACKER_DELIVERY_EVENT,
      at_ms: Date.now(),
      data: { ticket_key: `github:${s.project.repository}#${number}`, project_id: s.project.id, ...data },
    });
  }

  it("review_label takes the ready label off and puts the review label on; pr_comment links the pull request once", async () => {
    const s = await setup("publication-deliveries");
    const number = nextNumber++;
    const runId = await admit(s, number);
    const prUrl = `https://github.com/${s.project.repository}/pull/77`;
    await ask(s, runId, number, 900, { kind: "review_label", pr_url: prUrl, pr_number: 77 });
    await ask(s, runId, number, 901, { kind: "pr_comment", pr_url: prUrl, pr_number: 77 });
    const done = await waitFor("both deliveries", async () => {
      const list = await deliveries(s.org.admin, runId);
      return list.length === 2 && list.every((d) => d.status === "delivered") ? list : undefined;
    });
    const labels = s.tracker.issues.get(number)!.facts.labels;
    expect(labels).not.toContain(s.project.readyLabel);
    expect(labels).toContain(s.project.reviewLabel);
    const comments = s.tracker.comments.get(number)!;
    expect(comments).toHaveLength(1);
    expect(comments[0].body).toContain(prUrl);
    expect(comments[0].body).toContain(deliveryMarker(runId, "pr_comment"));
    expect(done.find((d) => d.kind === "review_label")).toMatchObject({ receipt: null, tries: 1 });
    expect(done.find((d) => d.kind === "pr_comment")).toMatchObject({ receipt: { comment_id: comments[0].id, url: comments[0].url } });
    // The same events again send nothing.
    await ask(s, runId, number, 901, { kind: "pr_comment", pr_url: prUrl, pr_number: 77 });
    await new Promise((r) => setTimeout(r, 1_500));
    expect(s.tracker.comments.get(number)).toHaveLength(1);
    expect(s.tracker.calls.labels).toBe(1);
  });

  it("a malformed delivery event is refused (retried, then dead-lettered) and records nothing", async () => {
    const s = await setup("publication-bad");
    const runId = await admit(s, nextNumber++);
    await expect(ask(s, runId, nextNumber, 902, { kind: "a_fax" })).rejects.toThrow(/kind/);
    await expect(
      requestTrackerDelivery(env, { run_id: runId, org_id: s.org.orgId, seq: 903, attempt: 1, type: TRACKER_DELIVERY_EVENT, at_ms: Date.now(), data: { kind: "pr_comment", ticket_key: "jira:X-1", project_id: s.project.id } }),
    ).rejects.toThrow(/ticket_key/);
    expect(await deliveries(s.org.admin, runId)).toEqual([]);
  });
});

describe("continuing a blocked run", () => {
  /** An admitted run of issue `number`, blocked by its first attempt, its comment delivered. */
  async function blockedRun(s: Setup, number: number) {
    const runId = await admit(s, number);
    const first = await start(s, runId);
    expect((await blockedReport(first.token, runId)).status).toBe(200);
    await deliveryReaches(s.org.admin, runId, "delivered");
    return { runId, first };
  }

  it("a reply comment, a label snapshot or a bot's ready label leaves the run blocked", async () => {
    const s = await setup("continue-reply");
    const number = nextNumber++;
    const { runId } = await blockedRun(s, number);
    const blocked = await getRun(s.org.admin, runId);

    const reply = example("issue_comment", "created");
    reply.issue.number = number;
    expect((await handleDelivery(env, config, fake.deps, message(s, reply, "issue_comment")))?.outcome).toBe("already_admitted");
    const snapshot = await reconcileProject(env, config, fake.deps, s.project, 50, "reconcile");
    expect(snapshot.results.find((r) => r.ticket.endsWith(`#${number}`))?.outcome).toBe("already_admitted");
    const bot = labeled(s, number, { login: "helper-bot[bot]", type: "Bot" });
    expect((await handleDelivery(env, config, fake.deps, message(s, bot)))?.outcome).toBe("already_admitted");

    expect(await getRun(s.org.admin, runId)).toEqual(blocked);
    expect((await claim(s.runner.token)).status).toBe(204);
  });

  it("a new human readiness generation requeues the same run, the generation is consumed, and the old attempt is refused", async () => {
    const s = await setup("continue-human");
    const number = nextNumber++;
    const { runId, first } = await blockedRun(s, number);

    const relabel = labeled(s, number);
    const answer = await handleDelivery(env, config, fake.deps, message(s, relabel));
    expect(answer).toMatchObject({ outcome: "authorized", runId });
    const run = await getRun(s.org.admin, runId);
    expect(run).toMatchObject({ state: "queued", attempt: 1, blocker: null });
    const ticket = await call("GET", `/v1/autopilot/projects/${s.project.id}/tickets/${number}`, { token: s.org.admin });
    expect(ticket.body).toMatchObject({ status: "admitted", run_id: runId });
    expect(ticket.body.admitted_generation).toBe(ticket.body.generation);
    expect(ticket.body.history[0]).toMatchObject({ kind: "authorized", run_id: runId, basis: "human", actor: relabel.sender.login });
    // The consumed generation changes nothing when observed again.
    expect((await reconcileProject(env, config, fake.deps, s.project, 50, "reconcile")).results.find((r) => r.ticket.endsWith(`#${number}`))?.outcome).toBe("already_admitted");

    // The same run continues as attempt 2; the blocked attempt's token is stale.
    const second = await start(s, runId);
    expect(second.attempt).toBe(2);
    const stale = await blockedReport(first.token, runId, 2);
    expect(stale.status).toBe(409);
    expect(stale.body.error).toMatchObject({ code: "stale_attempt", current_attempt: 2 });
    expect((await getRun(s.org.admin, runId)).state).toBe("implementing");
    // Still one run for the issue.
    const runs = await call("GET", "/v1/runs?limit=200", { token: s.org.admin });
    expect(runs.body.runs.map((r: Json) => r.id)).toEqual([runId]);
  });

  it("a run blocked again in a later attempt gets a comment for its new blocker, and the first one's receipt is superseded", async () => {
    const s = await setup("continue-again");
    const number = nextNumber++;
    const { runId } = await blockedRun(s, number);
    expect((await handleDelivery(env, config, fake.deps, message(s, labeled(s, number))))?.outcome).toBe("authorized");
    const second = await start(s, runId);
    const again = { ...BLOCKER, summary: "Redis is chosen, but no Redis URL is configured.", questions: ["Which Redis URL?"] };
    expect((await blockedReport(second.token, runId, 1, again)).status).toBe(200);
    expect((await getRun(s.org.admin, runId)).blocker).toMatchObject({ summary: again.summary, attempt: 2 });

    const delivered = await waitFor("the second blocker comment", async () =>
      (await deliveries(s.org.admin, runId)).find((d) => d.status === "delivered" && (s.tracker.comments.get(number) ?? []).length === 2 && d.receipt.comment_id === s.tracker.comments.get(number)![1].id),
    );
    const comments = s.tracker.comments.get(number)!;
    expect(comments[0].body).toContain(BLOCKER.summary);
    expect(comments[1].body).toContain(again.summary);
    expect(comments[1].body).toContain(deliveryMarker(runId, "blocker_comment", 2));
    expect(delivered).toMatchObject({ kind: "blocker_comment", tries: 1 });
    expect(await deliveries(s.org.admin, runId)).toHaveLength(1);
  });
});

describe("the document describes the delivery routes", () => {
  it("lists listRunDeliveries and retryRunDelivery with their tag, the refusals they give, and the blocked report outcome", async () => {
    const doc = (await call("GET", "/v1/openapi.json")).body;
    const list = doc.paths["/v1/runs/{id}/deliveries"]?.get;
    const retry = doc.paths["/v1/runs/{id}/deliveries/{kind}/retry"]?.post;
    expect(list).toMatchObject({ operationId: "listRunDeliveries", tags: ["Autopilot"] });
    expect(retry).toMatchObject({ operationId: "retryRunDelivery", tags: ["Autopilot"] });
    const codes = (op: Json, status: number) => op.responses[String(status)]?.content["application/json"].schema.properties.error.properties.code.enum ?? [];
    expect(codes(list, 404)).toEqual(["not_found"]);
    expect(codes(retry, 409)).toEqual(["invalid_transition"]);
    expect(codes(retry, 403)).toEqual(["forbidden"]);
    expect(JSON.stringify(doc.paths["/v1/runs/{id}/reports"].post.requestBody)).toContain('"blocked"');
  });
});
