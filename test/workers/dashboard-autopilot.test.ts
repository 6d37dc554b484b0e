// The autopilot on the console (docs/autopilot.md; README "Dashboard"): a project's scheduler with
// its gates and the enable / drain / disable commands, its tickets with why each was admitted or
// refused (door, person, reasons) and each one's last error, the runs blocked on a question, and
// the publications with their pull request and tracker deliveries, a failed one retried by an
// admin; for a GitHub project and a Linear one alike.
//
// What is real: the projects store, admission, the TicketObjects, the run objects, the scheduler,
// the outbox and its consumer, the API and the console. What stands in: GitHub and Linear, as the
// in-memory tracker and code host of test/workers/autopilot-fakes.ts.

import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { IssueFacts } from "../../src/autopilot/provider";
import { handleDelivery, type AutopilotMessage } from "../../src/autopilot/queue";
import { loadConfig } from "../../src/config";
import { page, signIn } from "./dashboard-helpers";
import { waitFor } from "./events-helpers";
import { attemptCall, call, claim, createOrg, getRun, registerRunner, report, runAlarm } from "./helpers";
import { briefBody, createProject, deliverReadyIssue, example, FakeHost, installRealAutopilotWithTracker, type RealProject } from "./autopilot-fakes";

type Json = Record<string, any>;

const config = loadConfig(env as unknown as Record<string, unknown>);
const fake = installRealAutopilotWithTracker();
const hosts = new Map<string, FakeHost>();
fake.deps.publisher = (project) => {
  if (!hosts.has(project.id)) hosts.set(project.id, new FakeHost());
  return hosts.get(project.id)!;
};

const BLOCKER = {
  summary: "The cache needs a database and the repository configures two.",
  evidence: ["config/cache.yml names postgres"],
  questions: ["Should the cache use Postgres or SQLite?"],
  human_action: "Answer on the issue, then remove and add the ready label again.",
};
const PATCH = "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-comit\n+commit\n";

/** An organization of its own (its runner claims only its runs), its GitHub project and an admin's console session. */
async function setup(name: string) {
  const org = await createOrg(`dash-autopilot-${name}`);
  const project = await createProject(org.admin);
  return { org, project, session: await signIn(org.admin) };
}

const projectPage = async (s: { project: RealProject; session: string }) => {
  const answer = await page(`/dash/autopilot/${s.project.id}`, { cookie: s.session });
  expect(answer.status, answer.text).toBe(200);
  return answer.text;
};

/** Issue `number`'s labeled webhook with `body` as its text, handed to admission. */
function deliverIssue(projectId: string, number: number, body: string) {
  const payload = example("issues", "labeled");
  payload.issue.number = number;
  payload.issue.body = body;
  fake.tracker(projectId).fromPayload(payload);
  const message: AutopilotMessage = { kind: "autopilot.delivery", project_id: projectId, number, delivery_id: crypto.randomUUID(), event: "issues", action: "labeled", sender: { login: payload.sender.login, type: payload.sender.type, viaApp: null } };
  return handleDelivery(env, config, fake.deps, message);
}

/** Claims and launches the organization's next run, which must be `runId`; answers its attempt token. */
async function start(admin: string, runId: string) {
  const runner = await registerRunner(admin);
  const granted = await claim(runner.token);
  expect(granted.body.run_id).toBe(runId);
  expect((await attemptCall(runner.token, runId, granted.body.attempt, "launched", { sandbox_id: "sbx-1" })).status).toBe(200);
  return { runner, attempt: granted.body.attempt as number, token: granted.body.attempt_token as string };
}

describe("a project's scheduler on the console", () => {
  it("shows the gates, and an admin drains, disables and enables it, confirming what stops admission", async () => {
    const s = await setup("scheduler");
    const before = await projectPage(s);
    expect(before).toContain("▶ Enabled");
    expect(before).toContain("Always open");
    expect(before).toMatch(/<table id="gates"[\s\S]*Concurrency[\s\S]*✓ Open/);
    expect(before).toContain(`aria-label="Drain the scheduler of ${s.project.name}"`);

    const action = (command: string) => `/dash/autopilot/${s.project.id}/scheduler/${command}`;
    const unconfirmed = await page(action("drain"), { cookie: s.session, form: {} });
    expect(unconfirmed.status).toBe(400);
    expect(unconfirmed.text).toContain("Tick the confirmation box");
    expect((await call("GET", `/v1/autopilot/projects/${s.project.id}/scheduler`, { token: s.org.admin })).body).toMatchObject({ enabled: true, draining: false });

    const drained = await page(action("drain"), { cookie: s.session, form: { confirm: "yes" } });
    expect(drained.status).toBe(303);
    expect(drained.headers.get("Location")).toBe(`/dash/autopilot/${s.project.id}?done=scheduler+draining`);
    const draining = await page(drained.headers.get("Location")!, { cookie: s.session });
    expect(draining.text).toContain("◐ Draining");
    expect(draining.text).toContain("admits nothing (draining)");
    expect(draining.text).toContain(`aria-label="Enable the scheduler of ${s.project.name}"`);
    const list = (await page("/dash/autopilot", { cookie: s.session })).text;
    expect(list).toContain("◐ Draining");
    expect(list).toContain("✗ Drain: draining");

    expect((await page(action("disable"), { cookie: s.session, form: { confirm: "yes" } })).status).toBe(303);
    expect(await projectPage(s)).toContain("■ Disabled");
    expect((await page(action("enable"), { cookie: s.session, form: {} })).status).toBe(303);
    expect((await call("GET", `/v1/autopilot/projects/${s.project.id}/scheduler`, { token: s.org.admin })).body).toMatchObject({ enabled: true, draining: false });
    expect((await page(action("pause"), { cookie: s.session, form: { confirm: "yes" } })).status).toBe(404);
  });

  it("a member sees the gates without the commands, and the API refuses the command", async () => {
    const s = await setup("scheduler-member");
    const member = (await call("POST", "/v1/tokens", { token: s.org.admin, body: { kind: "member", role: "member" } })).body.token;
    const session = await signIn(member);
    const seen = await projectPage({ ...s, session });
    expect(seen).toContain("▶ Enabled");
    expect(seen).not.toContain("scheduler-actions");
    expect((await page(`/dash/autopilot/${s.project.id}/scheduler/disable`, { cookie: session, form: { confirm: "yes" } })).status).toBe(403);
    expect((await call("GET", `/v1/autopilot/projects/${s.project.id}/scheduler`, { token: s.org.admin })).body.enabled).toBe(true);
  });
});

describe("a project's tickets on the console", () => {
  it("the ticket list says why each ticket was admitted or refused, through which door and by whom, and its last error", async () => {
    const s = await setup("tickets");
    const admitted = await deliverReadyIssue(fake, s.project.id, 31);
    expect(admitted?.outcome).toBe("admitted");
    expect((await deliverIssue(s.project.id, 32, "No brief here."))?.outcome).toBe("refused");
    fake.tracker(s.project.id).failReads.issue = new Error("GitHub answered 502 (fake outage)");
    await expect(deliverIssue(s.project.id, 32, "No brief here.")).rejects.toThrow("502");
    fake.tracker(s.project.id).failReads.issue = null;

    const listed = (await call("GET", `/v1/autopilot/projects/${s.project.id}/tickets`, { token: s.org.admin })).body.tickets as Json[];
    const byNumber = new Map(listed.map((t) => [t.number, t]));
    expect(byNumber.get(31)).toMatchObject({
      status: "admitted",
      run_id: admitted!.runId,
      run_state: "queued",
      decision: { kind: "admitted", door: "webhook", actor: "Codertocat", basis: "human" },
      last_error: null,
    });
    expect(byNumber.get(32)).toMatchObject({
      status: "refused",
      run_state: null,
      decision: { kind: "refused", door: "webhook", actor: null },
      last_error: { door: "webhook", failure: "error", message: "GitHub answered 502 (fake outage)" },
    });

    const text = await projectPage(s);
    expect(text).toContain("admitted through the webhook door, made ready by Codertocat");
    expect(text).toContain("refused through the webhook door");
    expect(text).toContain("Agent Brief:");
    expect(text).toContain("GitHub answered 502 (fake outage)");
    expect(text).toContain("(queued)");

    // The next read that succeeds clears the list's last error, as it clears the ticket's.
    await deliverIssue(s.project.id, 32, "Still no brief.");
    const again = (await call("GET", `/v1/autopilot/projects/${s.project.id}/tickets?status=refused`, { token: s.org.admin })).body.tickets as Json[];
    expect(again).toEqual([expect.objectContaining({ number: 32, last_error: null })]);
    expect(await projectPage(s)).not.toContain("GitHub answered 502 (fake outage)");
  });

  it("a Linear project names its team and shows its tickets as ENG-n, linking to Linear", async () => {
    const org = await createOrg("dash-autopilot-linear");
    const project = await createProject(org.admin, {
      name: "widgets from linear",
      repository: "acme/widgets",
      ready_label: undefined,
      tracker: { kind: "linear", workspace: "acme", team: "ENG", ready_label: "ready", review_state: "In Review", api_key: "lin_api_a_test_key_0123456789" },
    });
    const facts: IssueFacts = { ref: { provider: "linear", repository: "acme/ENG", number: 12 }, title: "Issue 12", body: briefBody(), state: "open", stateReason: null, labels: ["ready"], url: "https://linear.app/acme/issue/ENG-12/issue", updatedAtMs: Date.now() };
    fake.tracker(project.id).issues.set(12, { facts, blockers: [], transition: { eventId: "history-12", atMs: Date.now(), actor: { login: "alice@example.com", type: "User", viaApp: null } } });
    expect((await call("POST", `/v1/autopilot/projects/${project.id}/reconcile`, { token: org.admin, body: {} })).status).toBe(200);

    const text = await projectPage({ project, session: await signIn(org.admin) });
    expect(text).toContain("Linear team ENG of acme");
    expect(text).toContain(`href="/dash/autopilot/${project.id}/tickets/12">ENG-12</a>`);
    expect(text).toContain('href="https://linear.app/acme/issue/ENG-12"');
    expect(text).toContain("admitted through the operator door, made ready by alice@example.com");
    expect(text).toContain("Requests Linear counted in the last hour");
    // Its configuration: where Linear delivers, and that its secrets are stored, never shown.
    const config = text.slice(text.indexOf('<section id="configuration"'));
    expect(config).toContain(`<code>http://docket.test/v1/autopilot/projects/${project.id}/linear/webhook</code>`);
    expect(config).toMatch(/<dt>Linear API key<\/dt><dd>stored \(never shown\)<\/dd>/);
    expect(config).not.toContain("lin_api_a_test_key_0123456789");
  });

  it("shows a GitHub project's configuration: its webhook address, its App, what its runs launch; secrets only as stored", async () => {
    const s = await setup("configuration");
    const config = (await projectPage(s)).split('<section id="configuration"')[1];
    expect(config).toContain(`<code>http://docket.test/v1/autopilot/projects/${s.project.id}/webhook</code>`);
    expect(config).toContain("events: Issues, Issue comment, Issue dependencies");
    expect(config).toMatch(/<dt>Webhook secret<\/dt><dd>stored \(never shown\)<\/dd>/);
    expect(config).toContain("app 123456, installation 7890123 at <code>https://api.github.com</code>; private key stored (never shown)");
    expect(config).toContain("process · <code>node agent.mjs</code>");
    expect(config).not.toContain("BEGIN");
    // With no project yet, the projects page says how one is made.
    const empty = await createOrg("dash-autopilot-none");
    expect((await page("/dash/autopilot", { cookie: await signIn(empty.admin) })).text).toContain("No autopilot project is configured. An admin creates one here (&quot;New autopilot project&quot;) or with POST /v1/autopilot/projects");
  });
});

describe("a project's runs on the console", () => {
  it("a run blocked on a question shows on its project's page with the question and what a person must do", async () => {
    const s = await setup("blocked");
    const admitted = await deliverReadyIssue(fake, s.project.id, 41);
    const runId = admitted!.runId!;
    const { token } = await start(s.org.admin, runId);
    expect((await report(token, runId, { seq: 1, final: { outcome: "blocked", exit_codes: { agent: 0 }, blocker: BLOCKER } })).status).toBe(200);

    const blocked = (await call("GET", `/v1/autopilot/projects/${s.project.id}/runs?state=blocked`, { token: s.org.admin })).body.runs as Json[];
    expect(blocked).toEqual([expect.objectContaining({ id: runId, state: "blocked", ticket: "github:Codertocat/Hello-World#41", blocker: expect.objectContaining({ questions: BLOCKER.questions }) })]);
    expect((await call("GET", `/v1/autopilot/projects/${s.project.id}/runs?state=queued`, { token: s.org.admin })).body.runs).toEqual([]);
    const bad = await call("GET", `/v1/autopilot/projects/${s.project.id}/runs?state=stuck`, { token: s.org.admin });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: "invalid_request", field: "state" });

    const text = await projectPage(s);
    expect(text).toMatch(/<table id="blocked-runs"[\s\S]*Should the cache use Postgres or SQLite\?[\s\S]*Answer on the issue, then remove and add the ready label again\./);
    expect(text).toContain(`href="/dash/autopilot/${s.project.id}/tickets/41">#41</a>`);
    expect(text).toContain("(blocked)");
  });

  it("a failed tracker delivery shows its last error, and an admin's retry sends it again", async () => {
    const s = await setup("retry");
    const runId = (await deliverReadyIssue(fake, s.project.id, 51))!.runId!;
    const { token } = await start(s.org.admin, runId);
    fake.tracker(s.project.id).failNext.post = config.trackerDeliveryMaxAttempts;
    expect((await report(token, runId, { seq: 1, final: { outcome: "blocked", exit_codes: { agent: 0 }, blocker: BLOCKER } })).status).toBe(200);
    await waitFor("the blocker comment to fail", async () => (await call("GET", `/v1/runs/${runId}/deliveries`, { token: s.org.admin })).body.deliveries.find((d: Json) => d.status === "failed"));

    const text = await projectPage(s);
    expect(text).toContain("Blocker comment: <span class=\"bad\">✗ failed</span>");
    expect(text).toContain("GitHub answered 502 (fake outage)");
    const retry = `/dash/autopilot/${s.project.id}/runs/${runId}/deliveries/blocker_comment/retry`;
    expect(text).toContain(`action="${retry}"`);
    expect(text).toContain(`aria-label="Retry the blocker comment of ${runId}"`);

    expect((await page(`/dash/autopilot/${s.project.id}/runs/${runId}/deliveries/nonsense/retry`, { cookie: s.session, form: {} })).status).toBe(404);
    const retried = await page(retry, { cookie: s.session, form: {} });
    expect(retried.status).toBe(303);
    await waitFor("the blocker comment to be delivered", async () => (await call("GET", `/v1/runs/${runId}/deliveries`, { token: s.org.admin })).body.deliveries.find((d: Json) => d.status === "delivered"));
    const after = await projectPage(s);
    expect(after).toContain("Blocker comment: <span class=\"ok\">✓ delivered</span>");
    expect(after).not.toContain(`action="${retry}"`);
  });

  it("a publication shows its pull request and the tracker deliveries it queued", async () => {
    const s = await setup("publication");
    const host = fake.deps.publisher!(s.project, s.project.secrets, config) as FakeHost;
    const runId = (await deliverReadyIssue(fake, s.project.id, 61))!.runId!;
    const { runner, attempt, token } = await start(s.org.admin, runId);
    const final = { outcome: "completed", exit_codes: { agent: 0 }, artifact: { patch: PATCH, source_revision: "b".repeat(40), model: "m", limitations: [] }, cost_cents: 3 };
    expect((await report(token, runId, { seq: 1, final })).body.state).toBe("publishing");
    const publishing = await projectPage(s);
    expect(publishing).toContain(`None yet: branch <code>docket/${runId}</code> not pushed yet`);

    host.branches.set(`docket/${runId}`, "a".repeat(40));
    expect((await attemptCall(runner.token, runId, attempt, "pushed", { branch: `docket/${runId}`, head_sha: "a".repeat(40) })).status).toBe(200);
    await waitFor("the pull request", async () => {
      await runAlarm(runId);
      return (await getRun(s.org.admin, runId)).state === "completed" || undefined;
    });
    await waitFor("the deliveries", async () => ((await call("GET", `/v1/runs/${runId}/deliveries`, { token: s.org.admin })).body.deliveries as Json[]).filter((d) => d.status === "delivered").length === 2 || undefined);

    const text = await projectPage(s);
    const pr = host.pulls[0];
    expect(text).toMatch(new RegExp(`<table id="publications"[\\s\\S]*href="${pr.url}"[^>]*>#${pr.number}</a>`));
    expect(text).toContain("Review label: <span class=\"ok\">✓ delivered</span>");
    expect(text).toContain("Pull-request comment: <span class=\"ok\">✓ delivered</span>");
  });
});
