// Autopilot admission (../shared/spec/run-lifecycle.md, "Admission", "Human readiness
// authorization"): a GitHub issue becomes at most one run, and only on a human's word.
//
// What is real: the projects, created through POST /v1/autopilot/projects and read by the D1 store
// with its encrypted secrets (src/autopilot/projects.ts); the Agent Brief parser, eligibility and
// human-readiness rules (src/autopilot/{brief,eligibility,readiness}.ts); the webhook door, the
// queue consumer, reconciliation, the TicketObject and the pre-claim withdrawal. Payloads are the
// real ones of @octokit/webhooks-examples (a bot's issues.labeled is a real payload with its sender
// changed, signed again with the same secret), their issue bodies given a valid Agent Brief.
// What stands in: GitHub only. It is not reachable inside the Workers pool, so the tracker is an
// in-memory TrackerProvider built from the same example payloads (test/workers/autopilot-fakes.ts);
// test/e2e/autopilot.test.mjs runs the real GitHub client against a fake GitHub server.

import { createExecutionContext, createMessageBatch, getQueueResult, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import worker from "../../src/index";
import protocol from "../../docs/protocol.md?raw";
import { beforeAll, describe, expect, it } from "vitest";
import { AUTOPILOT_QUEUE, handleDelivery, type AutopilotMessage } from "../../src/autopilot/queue";
import { reconcileProject } from "../../src/autopilot/reconcile";
import { ticketStub } from "../../src/autopilot/admission";
import { newId } from "../../src/lib/crypto";
import ticketMigrations from "../../durable-objects/drizzle/ticket/migrations";
import { DRIZZLE_MIGRATIONS_TABLE } from "../../durable-objects/store";
import { signatureValid, ticketOfDelivery } from "../../src/autopilot/webhook";
import { DEFAULTS, loadConfig } from "../../src/config";
import { call, claim, createOrg, registerRunner, sleep } from "./helpers";
import { briefBody, createProject, example, installRealAutopilotWithTracker, sign, WEBHOOK_SECRET, type FakeTracker, type RealProject } from "./autopilot-fakes";

const SECRET = WEBHOOK_SECRET;
const config = loadConfig(env as unknown as Record<string, unknown>);
const fake = installRealAutopilotWithTracker();

let org: { orgId: string; admin: string };
let project: RealProject;
let tracker: FakeTracker;
let nextNumber = 100;

beforeAll(async () => {
  org = await createOrg("autopilot");
  project = await createProject(org.admin);
  tracker = fake.tracker(project.id);
});

/** A real issues.labeled payload about a fresh issue number (each test its own ticket). */
function labeledPayload(number = nextNumber++) {
  const payload = example("issues", "labeled");
  payload.issue.number = number;
  payload.issue.body = briefBody(payload.issue.body);
  return payload;
}

async function postWebhook(projectId: string, event: string, body: string, headers: Record<string, string> = {}) {
  return call("POST", `/v1/autopilot/projects/${projectId}/webhook`, {
    rawBody: body,
    headers: { "X-GitHub-Event": event, "X-GitHub-Delivery": crypto.randomUUID(), "X-Hub-Signature-256": await sign(SECRET, body), ...headers },
  });
}

function delivery(payload: Record<string, any>, deliveryId = crypto.randomUUID(), event = "issues"): AutopilotMessage {
  const labeled = event === "issues" && payload.action === "labeled" && payload.label?.name === project.readyLabel;
  return {
    kind: "autopilot.delivery",
    project_id: project.id,
    number: payload.issue.number,
    delivery_id: deliveryId,
    event,
    action: payload.action,
    sender: labeled ? { login: payload.sender.login, type: payload.sender.type, viaApp: null } : null,
  };
}

async function tickets(status?: string) {
  const res = await call("GET", `/v1/autopilot/projects/${project.id}/tickets${status ? `?status=${status}` : ""}`, { token: org.admin });
  expect(res.status).toBe(200);
  return res.body.tickets as Record<string, any>[];
}

async function ticketOf(number: number) {
  return (await tickets()).find((t) => t.number === number);
}

/** Which ticket of the project a test means (the ticket's object is named by the project and the key). */
function ticketAt(number: number) {
  return { projectId: project.id, ticketKey: `github:${project.repository}#${number}` };
}

/** Runs of this organization created for ticket `number` (their metadata names it). */
async function runsOf(number: number) {
  const list = await call("GET", "/v1/runs?limit=200", { token: org.admin });
  const found = [];
  for (const row of list.body.runs) {
    const run = await call("GET", `/v1/runs/${row.id}`, { token: org.admin });
    if (run.body.metadata?.autopilot_ticket === `github:${project.repository}#${number}`) found.push(run.body);
  }
  return found;
}

describe("signature verification", () => {
  it("verifies GitHub's documented test vector", async () => {
    expect(await signatureValid(SECRET, "Hello, World!", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")).toBe(true);
    expect(await signatureValid(SECRET, "Hello, World?", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")).toBe(false);
  });

  it("accepts the test vector at the webhook (an event admission does not subscribe to is acknowledged, ignored)", async () => {
    const res = await call("POST", `/v1/autopilot/projects/${project.id}/webhook`, {
      rawBody: "Hello, World!",
      headers: { "X-GitHub-Event": "ping", "X-GitHub-Delivery": "d-vector", "X-Hub-Signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17" },
    });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ delivery_id: "d-vector", event: "ping", queued: false });
  });

  it("answers 401 to a tampered body, a missing and a malformed signature, never 500", async () => {
    const body = JSON.stringify(labeledPayload());
    const signature = await sign(SECRET, body);
    const tampered = await postWebhook(project.id, "issues", body.replace("Codertocat", "Codertocaz"), { "X-Hub-Signature-256": signature });
    expect(tampered.status).toBe(401);
    expect(tampered.body.error.code).toBe("unauthorized");
    const missing = await call("POST", `/v1/autopilot/projects/${project.id}/webhook`, { rawBody: body, headers: { "X-GitHub-Event": "issues", "X-GitHub-Delivery": "d-missing" } });
    expect(missing.status).toBe(401);
    for (const malformed of ["sha256=zz", "garbage", "sha1=757107ea0eb2509fc211221cce984b8a37570b6d", "sha256="]) {
      const res = await postWebhook(project.id, "issues", body, { "X-Hub-Signature-256": malformed });
      expect(res.status, malformed).toBe(401);
      expect(res.body.error.code).toBe("unauthorized");
    }
  });

  it("answers an unknown project as a bad signature, 401, whatever the signature", async () => {
    const body = JSON.stringify(labeledPayload());
    const res = await postWebhook("apj_000000000000000000000000", "issues", body);
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe("unauthorized");
  });
});

describe("admission through the webhook", () => {
  it("a user's issues.labeled admits one run, which appears queued with the issue as its brief", async () => {
    const payload = labeledPayload();
    tracker.fromPayload(payload);
    const res = await postWebhook(project.id, "issues", JSON.stringify(payload));
    expect(res.status).toBe(202);
    expect(res.body.queued).toBe(true);
    // The queue's consumer admits it: watch the ticket and the run appear.
    let ticket;
    for (let i = 0; i < 100 && ticket?.status !== "admitted"; i++) {
      await sleep(50);
      ticket = await ticketOf(payload.issue.number);
    }
    expect(ticket).toMatchObject({ status: "admitted", reasons: [] });
    const run = await call("GET", `/v1/runs/${ticket!.run_id}`, { token: org.admin });
    expect(run.body.state).toBe("queued");
    expect(run.body.brief).toContain(payload.issue.title);
    expect(run.body.metadata).toMatchObject({ autopilot_project: project.id, autopilot_ticket: `github:Codertocat/Hello-World#${payload.issue.number}` });
    expect(await runsOf(payload.issue.number)).toHaveLength(1);
    // The ticket's history names the person whose ready transition admitted it.
    const detail = await call("GET", `/v1/autopilot/projects/${project.id}/tickets/${payload.issue.number}`, { token: org.admin });
    expect(detail.status).toBe(200);
    expect(detail.body.history).toHaveLength(1);
    expect(detail.body.history[0]).toMatchObject({ kind: "admitted", door: "webhook", basis: "human", actor: "Codertocat", run_id: ticket!.run_id });
    expect(detail.body.admitted_generation).toBe(detail.body.generation);
    expect(detail.body.issue_url).toBe(`https://github.com/Codertocat/Hello-World/issues/${payload.issue.number}`);
    const unseen = await call("GET", `/v1/autopilot/projects/${project.id}/tickets/99999`, { token: org.admin });
    expect(unseen.status).toBe(404);
    expect(unseen.body.error.code).toBe("not_found");
  });

  it("a bot's issues.labeled admits none, and the refusal says why", async () => {
    const payload = labeledPayload();
    payload.sender = { ...payload.sender, login: "docket-helper[bot]", type: "Bot" };
    const issue = tracker.fromPayload(payload);
    expect(issue.transition?.actor?.type).toBe("Bot");
    const answer = await handleDelivery(env, config, fake.deps, delivery(payload));
    expect(answer).toMatchObject({ outcome: "refused", runId: null });
    expect(answer!.reasons.join(" ")).toContain("docket-helper[bot]");
    const ticket = await ticketOf(payload.issue.number);
    expect(ticket).toMatchObject({ status: "refused", run_id: null });
    expect(ticket!.reasons[0]).toBe("the change was sent by docket-helper[bot], an account of type Bot, not a person; only a person's ready label admits an issue");
    expect(await runsOf(payload.issue.number)).toHaveLength(0);
  });

  it("the bot's payload, signed again with the same secret, is accepted by the webhook and still admits none", async () => {
    const payload = labeledPayload();
    payload.sender = { ...payload.sender, login: "docket-helper[bot]", type: "Bot" };
    tracker.fromPayload(payload);
    const res = await postWebhook(project.id, "issues", JSON.stringify(payload));
    expect(res.status).toBe(202);
    let ticket;
    for (let i = 0; i < 100 && !ticket; i++) {
      await sleep(50);
      ticket = await ticketOf(payload.issue.number);
    }
    expect(ticket?.status).toBe("refused");
    expect(await runsOf(payload.issue.number)).toHaveLength(0);
  });

  it("a person's ready label on an issue without a valid Agent Brief admits none, and the brief's errors are shown", async () => {
    const payload = labeledPayload();
    payload.issue.body = example("issues", "labeled").issue.body;
    tracker.fromPayload(payload);
    const answer = await handleDelivery(env, config, fake.deps, delivery(payload));
    expect(answer).toMatchObject({ outcome: "refused", runId: null });
    const ticket = await ticketOf(payload.issue.number);
    expect(ticket).toMatchObject({ status: "refused", run_id: null });
    expect(ticket!.reasons).toEqual(['Agent Brief: the issue has no "## Agent Brief" section; add one with at least "goal: …" (docs/autopilot.md, "The Agent Brief")']);
    expect(await runsOf(payload.issue.number)).toHaveLength(0);
  });

  it("the same delivery twice admits once", async () => {
    const payload = labeledPayload();
    tracker.fromPayload(payload);
    const message = delivery(payload, "delivery-same");
    const first = await handleDelivery(env, config, fake.deps, message);
    const second = await handleDelivery(env, config, fake.deps, message);
    expect(first?.outcome).toBe("admitted");
    expect(second).toMatchObject({ outcome: "duplicate_delivery", runId: first!.runId });
    expect(await runsOf(payload.issue.number)).toHaveLength(1);
  });

  it("the same delivery posted twice to the webhook admits once", async () => {
    const payload = labeledPayload();
    tracker.fromPayload(payload);
    const body = JSON.stringify(payload);
    const headers = { "X-GitHub-Delivery": "redelivered-1" };
    expect((await postWebhook(project.id, "issues", body, headers)).status).toBe(202);
    expect((await postWebhook(project.id, "issues", body, headers)).status).toBe(202);
    let ticket;
    for (let i = 0; i < 100 && ticket?.status !== "admitted"; i++) {
      await sleep(50);
      ticket = await ticketOf(payload.issue.number);
    }
    expect(ticket?.status).toBe("admitted");
    // Both messages consumed (the second is a duplicate): still one run.
    await sleep(1_500);
    expect(await runsOf(payload.issue.number)).toHaveLength(1);
    const detail = await call("GET", `/v1/autopilot/projects/${project.id}/tickets/${payload.issue.number}`, { token: org.admin });
    expect(detail.body.history.filter((h: Record<string, unknown>) => h.kind === "admitted")).toHaveLength(1);
  });

  it("a duplicate webhook racing a reconciliation admits one run", async () => {
    const payload = labeledPayload();
    tracker.fromPayload(payload);
    const [a, b, summary] = await Promise.all([
      handleDelivery(env, config, fake.deps, delivery(payload, "race-1")),
      handleDelivery(env, config, fake.deps, delivery(payload, "race-2")),
      reconcileProject(env, config, fake.deps, project, 50, "reconcile"),
    ]);
    const mine = summary.results.find((r) => r.ticket.endsWith(`#${payload.issue.number}`));
    const outcomes = [a!.outcome, b!.outcome, mine!.outcome];
    expect(outcomes.filter((o) => o === "admitted")).toHaveLength(1);
    expect(outcomes.filter((o) => o === "already_admitted")).toHaveLength(2);
    expect(await runsOf(payload.issue.number)).toHaveLength(1);
  });
});

describe("what creates nothing", () => {
  it("a comment on an issue never made ready leaves no ticket behind", async () => {
    const comment = example("issue_comment", "created");
    comment.issue.number = nextNumber++;
    tracker.fromPayload(comment);
    const answer = await handleDelivery(env, config, fake.deps, delivery(comment, crypto.randomUUID(), "issue_comment"));
    expect(answer).toMatchObject({ outcome: "unchanged", runId: null });
    expect(await ticketOf(comment.issue.number)).toBeUndefined();
    expect(await runsOf(comment.issue.number)).toHaveLength(0);
  });

  it("an unrelated comment on a completed issue creates nothing", async () => {
    const labeled = labeledPayload();
    const issue = tracker.fromPayload(labeled);
    const admitted = await handleDelivery(env, config, fake.deps, delivery(labeled));
    expect(admitted?.outcome).toBe("admitted");
    // The run ends and the issue is closed as completed, still carrying the ready label.
    const cancel = await call("POST", `/v1/runs/${admitted!.runId}/cancel`, { token: org.admin, body: {} });
    expect(cancel.status).toBe(200);
    issue.facts = { ...issue.facts, state: "closed", stateReason: "completed" };
    const comment = example("issue_comment", "created");
    comment.issue.number = labeled.issue.number;
    comment.issue.state = "closed";
    const answer = await handleDelivery(env, config, fake.deps, delivery(comment, crypto.randomUUID(), "issue_comment"));
    expect(answer).toMatchObject({ outcome: "unchanged", runId: null });
    expect(await runsOf(labeled.issue.number)).toHaveLength(1);
    // Moved to review (ready label off) and commented on again: still done, and no refusal recorded.
    issue.facts = { ...issue.facts, state: "open", stateReason: null, labels: ["needs-review"] };
    expect(await handleDelivery(env, config, fake.deps, delivery(comment, crypto.randomUUID(), "issue_comment"))).toMatchObject({ outcome: "unchanged", runId: null });
    const ticket = await call("GET", `/v1/autopilot/projects/${project.id}/tickets/${labeled.issue.number}`, { token: org.admin });
    expect(ticket.body).toMatchObject({ status: "done", run_id: null });
    expect((ticket.body.history as { kind: string }[]).map((h) => h.kind)).toEqual(["run_ended", "admitted"]);
    expect(await runsOf(labeled.issue.number)).toHaveLength(1);
  });

  it("the ticket reads done as soon as its run ended, without waiting for the issue's next observation", async () => {
    const labeled = labeledPayload();
    tracker.fromPayload(labeled);
    const admitted = await handleDelivery(env, config, fake.deps, delivery(labeled));
    expect(await ticketOf(labeled.issue.number)).toMatchObject({ status: "admitted", run_id: admitted!.runId });
    await call("POST", `/v1/runs/${admitted!.runId}/cancel`, { token: org.admin, body: {} });
    const path = `/v1/autopilot/projects/${project.id}/tickets/${labeled.issue.number}`;
    let ticket = (await call("GET", path, { token: org.admin })).body;
    for (let i = 0; i < 100 && ticket.status !== "done"; i++) {
      await new Promise((r) => setTimeout(r, 100));
      ticket = (await call("GET", path, { token: org.admin })).body;
    }
    expect(ticket).toMatchObject({ status: "done", run_id: null });
    expect(ticket.history[0]).toMatchObject({ kind: "run_ended", door: "run_end", run_id: admitted!.runId, reasons: ["the run ended cancelled"] });
    expect(await ticketOf(labeled.issue.number)).toMatchObject({ status: "done", run_id: null });
  });

  it("a comment or an edit on a ready issue whose run has ended creates nothing: the generation already had its run", async () => {
    const labeled = labeledPayload();
    tracker.fromPayload(labeled);
    const admitted = await handleDelivery(env, config, fake.deps, delivery(labeled));
    await call("POST", `/v1/runs/${admitted!.runId}/cancel`, { token: org.admin, body: {} });
    const comment = example("issue_comment", "created");
    comment.issue.number = labeled.issue.number;
    const edited = example("issues", "edited");
    edited.issue.number = labeled.issue.number;
    expect((await handleDelivery(env, config, fake.deps, delivery(comment, crypto.randomUUID(), "issue_comment")))?.outcome).toBe("unchanged");
    expect((await handleDelivery(env, config, fake.deps, delivery(edited)))?.outcome).toBe("unchanged");
    const ticket = await ticketOf(labeled.issue.number);
    expect(ticket).toMatchObject({ status: "done", run_id: null });
    expect(await runsOf(labeled.issue.number)).toHaveLength(1);
    // A new human ready transition opens a new generation: one more run.
    tracker.fromPayload(labeledPayload(labeled.issue.number));
    expect((await handleDelivery(env, config, fake.deps, delivery(labeled)))?.outcome).toBe("admitted");
    expect(await runsOf(labeled.issue.number)).toHaveLength(2);
  });
});

describe("the pre-claim recheck", () => {
  it("a newly blocked queued issue never starts: its run is withdrawn with the reason in its history, and no claim hands it out", async () => {
    const labeled = labeledPayload();
    const issue = tracker.fromPayload(labeled);
    const admitted = await handleDelivery(env, config, fake.deps, delivery(labeled));
    expect(admitted?.outcome).toBe("admitted");
    // Someone adds a blocking issue that is still open; reconciliation (or its webhook) learns it.
    const blocker = example("issues", "opened");
    issue.blockers = [{ ref: { provider: "github", repository: project.repository, number: 9001 }, facts: { ...issue.facts, ref: { provider: "github", repository: project.repository, number: 9001 }, title: blocker.issue.title, state: "open", labels: [] }, unreadable: null }];
    const summary = await reconcileProject(env, config, fake.deps, project, 50, "reconcile");
    const mine = summary.results.find((r) => r.ticket.endsWith(`#${labeled.issue.number}`));
    expect(mine).toMatchObject({ outcome: "lapsed", runId: admitted!.runId });
    const run = await call("GET", `/v1/runs/${admitted!.runId}`, { token: org.admin });
    expect(run.body.state).toBe("cancelled");
    expect(run.body.stop_request.reason).toContain("blocked by Codertocat/Hello-World#9001, which is still open");
    const events = await call("GET", `/v1/runs/${admitted!.runId}/events`, { token: org.admin });
    expect(JSON.stringify(events.body.events)).toContain("eligibility lapsed: blocked by Codertocat/Hello-World#9001, which is still open");
    // A runner asking for work gets nothing of this ticket.
    const runner = await registerRunner(org.admin);
    for (;;) {
      const res = await claim(runner.token);
      if (res.status === 204) break;
      expect(res.body.run_id).not.toBe(admitted!.runId);
    }
    const ticket = await ticketOf(labeled.issue.number);
    expect(ticket).toMatchObject({ status: "lapsed", run_id: null });
    expect(ticket!.reasons).toEqual(["blocked by Codertocat/Hello-World#9001, which is still open"]);

    // The blocker is closed as done: eligible again, but the lapsed generation admits nothing, and the ticket says what to do.
    issue.blockers = [];
    const again = await handleDelivery(env, config, fake.deps, delivery(labeled));
    expect(again).toMatchObject({ outcome: "unchanged", runId: null, reasons: [expect.stringContaining("removes and adds its ready label")] });
    expect((await ticketOf(labeled.issue.number))!.reasons).toEqual(again!.reasons);
    expect(await runsOf(labeled.issue.number)).toHaveLength(1);
  });

  it("a run already handed out is not withdrawn: the ticket keeps its claim on it", async () => {
    const labeled = labeledPayload();
    const issue = tracker.fromPayload(labeled);
    const admitted = await handleDelivery(env, config, fake.deps, delivery(labeled));
    const runner = await registerRunner(org.admin, { name: "holder" });
    let granted = false;
    for (let i = 0; i < 200 && !granted; i++) {
      const res = await claim(runner.token);
      if (res.status === 204) break;
      granted = res.body.run_id === admitted!.runId;
    }
    expect(granted).toBe(true);
    issue.facts = { ...issue.facts, labels: [] };
    const unlabeled = example("issues", "unlabeled");
    unlabeled.issue.number = labeled.issue.number;
    const answer = await handleDelivery(env, config, fake.deps, delivery(unlabeled));
    expect(answer).toMatchObject({ outcome: "already_admitted", runId: admitted!.runId });
    const run = await call("GET", `/v1/runs/${admitted!.runId}`, { token: org.admin });
    expect(run.body.state).toBe("claimed");
  });
});

describe("capacity", () => {
  it("overflow beyond the queue capacity is a visible capacity wait, and reconciliation reconsiders it", async () => {
    const small = await createProject(org.admin, { queue_capacity: 1, repository: "Codertocat/Small" });
    const smallTracker = fake.tracker(small.id);
    const first = labeledPayload(1);
    first.repository.full_name = "Codertocat/Small";
    const second = labeledPayload(2);
    second.repository.full_name = "Codertocat/Small";
    smallTracker.fromPayload(first);
    smallTracker.fromPayload(second);
    const step = await reconcileProject(env, config, fake.deps, small, 50, "operator");
    // The ready issues first, then the tickets holding a run (#1, examined already in this step).
    expect(step.results.map((r) => [r.ticket, r.outcome])).toEqual([
      ["github:Codertocat/Small#1", "admitted"],
      ["github:Codertocat/Small#2", "capacity_wait"],
    ]);
    expect(step.results[1].reasons[0]).toContain("queue capacity 1");
    const listed = await call("GET", `/v1/autopilot/projects/${small.id}/tickets?status=capacity_wait`, { token: org.admin });
    expect(listed.body.tickets).toHaveLength(1);
    expect(listed.body.tickets[0]).toMatchObject({ number: 2, status: "capacity_wait", run_id: null });
    // The first run ends: the next pass admits the waiting issue.
    await call("POST", `/v1/runs/${step.results[0].runId}/cancel`, { token: org.admin, body: {} });
    const again = await call("POST", `/v1/autopilot/projects/${small.id}/reconcile`, { token: org.admin });
    expect(again.status).toBe(200);
    expect(again.body.door).toBe("operator");
    expect(again.body.results.find((r: Record<string, any>) => r.ticket.endsWith("#2"))).toMatchObject({ outcome: "admitted" });
  });
});

describe("capacity under concurrent admissions", () => {
  it("two tickets admitted at once cannot both take the last queue place", async () => {
    const tight = await createProject(org.admin, { queue_capacity: 1, repository: "Codertocat/Tight" });
    const tightTracker = fake.tracker(tight.id);
    const messages = [11, 12].map((n) => {
      const payload = labeledPayload(n);
      payload.repository.full_name = "Codertocat/Tight";
      tightTracker.fromPayload(payload);
      return { ...delivery(payload), project_id: tight.id };
    });
    const answers = await Promise.all(messages.map((m) => handleDelivery(env, config, fake.deps, m)));
    expect(answers.map((a) => a!.outcome).sort()).toEqual(["admitted", "capacity_wait"]);
    const listed = await call("GET", `/v1/autopilot/projects/${tight.id}/tickets`, { token: org.admin });
    expect(listed.body.tickets.map((t: Record<string, any>) => t.status).sort()).toEqual(["admitted", "capacity_wait"]);
    for (const t of listed.body.tickets) expect(t.issue_url).toBe(`https://github.com/Codertocat/Tight/issues/${t.number}`);
  });
});

describe("operator routes", () => {
  it("reconcile needs an admin, and another organization's project is not found", async () => {
    const other = await createOrg("elsewhere");
    expect((await call("POST", `/v1/autopilot/projects/${project.id}/reconcile`, { token: other.admin })).status).toBe(404);
    expect((await call("GET", `/v1/autopilot/projects/${project.id}/tickets`, { token: other.admin })).status).toBe(404);
    const member = await call("POST", "/v1/tokens", { token: org.admin, body: { kind: "member", role: "member" } });
    const res = await call("POST", `/v1/autopilot/projects/${project.id}/reconcile`, { token: member.body.token });
    expect(res.status).toBe(403);
  });
});

describe("the ticket list", () => {
  it("pages a project's tickets most recently changed first, a tie in time by ticket descending, each exactly once, and filters by status", async () => {
    const listed = await createProject(org.admin, { repository: "Codertocat/Listed" });
    const rows: [number, string, number][] = [
      [1, "refused", 5_000],
      [2, "admitted", 4_000],
      [3, "refused", 4_000],
      [4, "done", 3_000],
      [5, "refused", 2_000],
    ];
    for (const [number, status, at] of rows) {
      await env.DB.prepare(
        "INSERT INTO autopilot_tickets (project_id, ticket_key, org_id, number, status, reasons, generation, run_id, updated_at_ms) VALUES (?, ?, ?, ?, ?, '[]', NULL, NULL, ?)",
      )
        .bind(listed.id, `github:codertocat/listed#${number}`, org.orgId, number, status, at)
        .run();
    }
    const page = async (query: string) => {
      const res = await call("GET", `/v1/autopilot/projects/${listed.id}/tickets?${query}`, { token: org.admin });
      expect(res.status).toBe(200);
      return { numbers: (res.body.tickets as { number: number }[]).map((t) => t.number), next: res.body.next_cursor as string | null };
    };
    const first = await page("limit=2");
    expect(first.numbers).toEqual([1, 3]);
    const second = await page(`limit=2&cursor=${encodeURIComponent(first.next!)}`);
    expect(second.numbers).toEqual([2, 4]);
    const last = await page(`limit=2&cursor=${encodeURIComponent(second.next!)}`);
    expect(last).toEqual({ numbers: [5], next: null });
    expect((await page("status=refused")).numbers).toEqual([1, 3, 5]);
    const refusedFirst = await page("status=refused&limit=1");
    expect((await page(`status=refused&limit=5&cursor=${encodeURIComponent(refusedFirst.next!)}`)).numbers).toEqual([3, 5]);
  });
});

describe("the AUTOPILOT queue's consumer", () => {
  it("acknowledges a delivery it decided, retries one whose tracker failed, and acknowledges one whose project is gone", async () => {
    const payload = labeledPayload();
    tracker.fromPayload(payload);
    const broken = await createProject(org.admin, { repository: "Codertocat/Broken" });
    const brokenTracker = fake.tracker(broken.id);
    brokenTracker.getIssue = async () => {
      throw new Error("GitHub answered 502");
    };
    const messages: AutopilotMessage[] = [
      delivery(payload, "queue-ok"),
      { ...delivery(payload, "queue-broken"), project_id: broken.id },
      { ...delivery(payload, "queue-gone"), project_id: "apj_111111111111111111111111" },
    ];
    const batch = createMessageBatch(AUTOPILOT_QUEUE, messages.map((body, i) => ({ id: `ap-${i}`, timestamp: new Date(), attempts: 1, body })));
    const ctx = createExecutionContext();
    await worker.queue(batch as MessageBatch<never>, env);
    const result = await getQueueResult(batch, ctx);
    expect(result.explicitAcks.sort()).toEqual(["ap-0", "ap-2"]);
    expect(result.retryMessages.map((m: { msgId: string }) => m.msgId)).toEqual(["ap-1"]);
    expect((await ticketOf(payload.issue.number))?.status).toBe("admitted");
  });

  it("retries a message its schema refuses (no project, or a number that is not one) and admits nothing for it", async () => {
    const payload = labeledPayload();
    tracker.fromPayload(payload);
    const { project_id: _gone, ...noProject } = delivery(payload, "queue-no-project");
    const messages = [noProject, { ...delivery(payload, "queue-bad-number"), number: String(payload.issue.number) }];
    const batch = createMessageBatch(AUTOPILOT_QUEUE, messages.map((body, i) => ({ id: `bad-${i}`, timestamp: new Date(), attempts: 1, body })));
    const ctx = createExecutionContext();
    await worker.queue(batch as MessageBatch<never>, env);
    const result = await getQueueResult(batch, ctx);
    expect(result.explicitAcks).toEqual([]);
    expect(result.retryMessages.map((m: { msgId: string }) => m.msgId).sort()).toEqual(["bad-0", "bad-1"]);
    expect(await ticketOf(payload.issue.number)).toBeUndefined();
  });
});

describe("the ticket's memory of deliveries and history", () => {
  it("forgets a delivery id after AUTOPILOT_DELIVERY_TTL_MS and keeps at most AUTOPILOT_DELIVERIES_MAX", async () => {
    const payload = labeledPayload();
    payload.sender = { ...payload.sender, login: "ci[bot]", type: "Bot" };
    tracker.fromPayload(payload);
    const stub = ticketStub(env, ticketAt(payload.issue.number));
    expect((await handleDelivery(env, config, fake.deps, delivery(payload, "old-delivery")))?.outcome).toBe("refused");
    expect((await handleDelivery(env, config, fake.deps, delivery(payload, "old-delivery")))?.outcome).toBe("duplicate_delivery");
    await runInDurableObject(stub, (_o, state) => {
      state.storage.sql.exec("UPDATE deliveries SET seen_at_ms = seen_at_ms - ?", config.autopilotDeliveryTtlMs + 1);
      for (let i = 0; i < config.autopilotDeliveriesMax + 20; i++) state.storage.sql.exec("INSERT INTO deliveries (delivery_id, seen_at_ms) VALUES (?, ?)", `filler-${i}`, Date.now());
    });
    // Expired: a redelivery of it is examined again (and still refused, with no second history entry).
    expect((await handleDelivery(env, config, fake.deps, delivery(payload, "old-delivery")))?.outcome).toBe("refused");
    const kept = await runInDurableObject(stub, (_o, state) => state.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM deliveries").one().n);
    expect(kept).toBe(config.autopilotDeliveriesMax);
    const read = await stub.read(ticketAt(payload.issue.number));
    expect(read?.history.filter((h) => h.kind === "refused")).toHaveLength(1);
  });
});

describe("which ticket a delivery names", () => {
  it("the sender is readiness evidence only on the ready label's own labeled event", () => {
    const labeled = example("issues", "labeled");
    expect(ticketOfDelivery("issues", labeled, "bug", DEFAULTS.autopilotWebhookFactsMaxBytes)?.sender).toEqual({ login: "Codertocat", type: "User", viaApp: null });
    expect(ticketOfDelivery("issues", labeled, "ready", DEFAULTS.autopilotWebhookFactsMaxBytes)?.sender).toBeNull();
    expect(ticketOfDelivery("issue_comment", example("issue_comment", "created"), "bug", DEFAULTS.autopilotWebhookFactsMaxBytes)).toMatchObject({ number: 1, sender: null, repository: "Codertocat/Hello-World" });
    expect(ticketOfDelivery("issues", { action: "labeled" }, "bug", DEFAULTS.autopilotWebhookFactsMaxBytes)).toBeNull();
  });

  it("an issue_dependencies delivery names the blocked issue (the package has no example: the shape of GitHub's documented payload)", () => {
    const base = example("issues", "opened");
    const payload = { action: "blocked_by_added", blocked_issue: { ...base.issue, number: 7 }, blocking_issue: { ...base.issue, number: 8 }, repository: base.repository, sender: base.sender };
    expect(ticketOfDelivery("issue_dependencies", payload, "bug", DEFAULTS.autopilotWebhookFactsMaxBytes)).toMatchObject({ number: 7, sender: null });
    // A blocked issue of another repository is named with its own repository (then ignored as not the project's).
    const elsewhere = { ...payload, blocked_issue: { ...payload.blocked_issue, repository_url: "https://api.github.com/repos/octo-org/octo-repo" } };
    expect(ticketOfDelivery("issue_dependencies", elsewhere, "bug", DEFAULTS.autopilotWebhookFactsMaxBytes)).toMatchObject({ number: 7, repository: "octo-org/octo-repo" });
  });
});

describe("an admission interrupted by a crash", () => {
  /**
   * What a crash leaves between the run's creation and the ticket's record of it: a real admission,
   * its ticket set back to the pending generation with the run id it recorded first.
   */
  async function crashAfterDispatch(payload: Record<string, any>) {
    const issue = tracker.fromPayload(payload);
    const admitted = await handleDelivery(env, config, fake.deps, delivery(payload));
    expect(admitted).toMatchObject({ outcome: "admitted" });
    const stub = ticketStub(env, ticketAt(payload.issue.number));
    await runInDurableObject(stub, (_o, state) => {
      state.storage.sql.exec("UPDATE ticket SET pending_generation = admitted_generation, admitted_generation = NULL, status = 'idle'");
      state.storage.sql.exec("DELETE FROM history");
    });
    return { issue, runId: admitted!.runId!, stub };
  }

  const FINISHED = "an admission interrupted before the ticket recorded it, finished";

  it("the next observation finds the run by the id the ticket recorded: never a second run", async () => {
    const payload = labeledPayload();
    const { runId, stub } = await crashAfterDispatch(payload);
    const answer = await handleDelivery(env, config, fake.deps, delivery(payload));
    expect(answer).toMatchObject({ outcome: "already_admitted", runId });
    expect(await runsOf(payload.issue.number)).toHaveLength(1);
    expect((await stub.read(ticketAt(payload.issue.number)))?.history[0]).toMatchObject({ kind: "admitted", run_id: runId, reasons: [FINISHED] });
  });

  it("an admission finished more than IDEMPOTENCY_KEY_TTL_MS after its crash still finds its one run", async () => {
    const payload = labeledPayload();
    const { runId } = await crashAfterDispatch(payload);
    // A day passes: every idempotency key of the organization is past its time and may be taken over.
    await env.DB.prepare("UPDATE idempotency_keys SET created_at_ms = created_at_ms - ? WHERE org_id = ?").bind(config.idempotencyKeyTtlMs + 1, org.orgId).run();
    expect(await handleDelivery(env, config, fake.deps, delivery(payload))).toMatchObject({ outcome: "already_admitted", runId });
    expect((await runsOf(payload.issue.number)).map((r) => r.id)).toEqual([runId]);
    const shown = await call("GET", `/v1/autopilot/projects/${project.id}/tickets/${payload.issue.number}`, { token: org.admin });
    expect(shown.body).toMatchObject({ status: "admitted", run_id: runId });
  });

  it("an admission that crashed before creating its run creates it under the id the ticket recorded", async () => {
    const payload = labeledPayload();
    const issue = tracker.fromPayload(payload);
    const runId = newId("run");
    await runInDurableObject(ticketStub(env, ticketAt(payload.issue.number)), (_o, state) => {
      state.storage.sql.exec(
        `INSERT INTO ticket (id, ticket_key, project_id, org_id, number, status, reasons, generation, admitted_generation, pending_generation, run_id, updated_at_ms)
         VALUES (1, ?, ?, ?, ?, 'idle', '[]', NULL, NULL, ?, ?, ?)`,
        ticketAt(payload.issue.number).ticketKey, project.id, org.orgId, payload.issue.number, issue.transition!.eventId, runId, Date.now(),
      );
    });
    expect(await handleDelivery(env, config, fake.deps, delivery(payload))).toMatchObject({ outcome: "already_admitted", runId });
    expect((await runsOf(payload.issue.number)).map((r) => r.id)).toEqual([runId]);
  });

  it("a run whose issue lapsed meanwhile is recorded and withdrawn before it can start", async () => {
    const payload = labeledPayload();
    const { issue, runId } = await crashAfterDispatch(payload);
    issue.facts = { ...issue.facts, labels: [] };
    const unlabeled = example("issues", "unlabeled");
    unlabeled.issue.number = payload.issue.number;
    expect(await handleDelivery(env, config, fake.deps, delivery(unlabeled))).toMatchObject({ outcome: "lapsed", runId });
    const run = await call("GET", `/v1/runs/${runId}`, { token: org.admin });
    expect(run.body.state).toBe("cancelled");
    expect(await runsOf(payload.issue.number)).toHaveLength(1);
  });
});

describe("the TicketObject's schema", () => {
  it("records each of its generated migrations as applied (durable-objects/store.ts)", async () => {
    const at = { projectId: project.id, ticketKey: "github:Codertocat/Hello-World#424242" };
    const stub = ticketStub(env, at);
    expect(await stub.read(at)).toBeNull();
    const applied = await runInDurableObject(stub, (_o, state) => state.storage.sql.exec(`SELECT created_at FROM ${DRIZZLE_MIGRATIONS_TABLE}`).toArray());
    expect(applied.map((r) => Number(r.created_at))).toEqual(ticketMigrations.journal.entries.map((e) => e.when));
  });
});

describe("the admission record", () => {
  it("says when it relied on the trusted-actor assumption instead of claiming a person", async () => {
    // GitHub's timeline records no addition of the label: only the webhook's User sender speaks for it.
    const unrecorded = (t: FakeTracker, repository: string) => {
      const payload = labeledPayload();
      payload.repository.full_name = repository;
      t.fromPayload(payload).transition = null;
      return payload;
    };
    // Without the assumption (the default) that is refused, with the reason shown.
    const plain = unrecorded(tracker, project.repository);
    const refused = await handleDelivery(env, config, fake.deps, delivery(plain));
    expect(refused).toMatchObject({ outcome: "refused", runId: null });
    expect(refused!.reasons.join(" ")).toContain("GitHub records no addition of the ready label");
    // A project that turned the assumption on admits it, and its record names the assumption.
    const trusted = await createProject(org.admin, { repository: "Codertocat/Trusted", trusted_actor_assumption: true });
    const payload = unrecorded(fake.tracker(trusted.id), "Codertocat/Trusted");
    const message = { ...delivery(payload, "trusted-delivery"), project_id: trusted.id };
    const answer = await handleDelivery(env, config, fake.deps, message);
    expect(answer?.outcome).toBe("admitted");
    const detail = await call("GET", `/v1/autopilot/projects/${trusted.id}/tickets/${payload.issue.number}`, { token: org.admin });
    expect(detail.body.history[0]).toMatchObject({ kind: "admitted", basis: "trusted_actor_assumption", actor: "Codertocat", run_id: answer!.runId });
    // A redelivery of the same delivery is recognized: still one run.
    expect(await handleDelivery(env, config, fake.deps, message)).toMatchObject({ outcome: "duplicate_delivery", runId: answer!.runId });
  });
});

describe("docs/protocol.md", () => {
  it("lists every field of a ticket's answer, and no other (shape autopilot-ticket)", async () => {
    const payload = labeledPayload();
    tracker.fromPayload(payload);
    await handleDelivery(env, config, fake.deps, delivery(payload));
    const detail = await call("GET", `/v1/autopilot/projects/${project.id}/tickets/${payload.issue.number}`, { token: org.admin });
    const marker = "<!-- shape: autopilot-ticket -->";
    const table = protocol.slice(protocol.indexOf(marker) + marker.length).trimStart().split("\n");
    const documented: string[] = [];
    for (const line of table) {
      if (!line.startsWith("|")) break;
      const field = /^\|\s*`([^`]+)`/.exec(line);
      if (field) documented.push(field[1]);
    }
    const answered = new Set<string>();
    for (const [key, value] of Object.entries(detail.body)) {
      if (key === "history") {
        answered.add("history[]");
        for (const entry of value as Record<string, unknown>[]) for (const k of Object.keys(entry)) answered.add(`history[].${k}`);
      } else answered.add(key);
    }
    expect([...answered].sort()).toEqual([...documented].sort());
  });
});
