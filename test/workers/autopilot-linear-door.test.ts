// The Linear webhook door (POST /v1/autopilot/projects/:id/linear/webhook; docs/autopilot.md,
// "Linear"): a project whose tracker is a Linear team takes deliveries signed as Linear signs them,
// verified by @linear/sdk's LinearWebhookClient, and hands the issue they name to the same admission
// as the GitHub door. Projects are created through the API and read by the D1 store; only the
// tracker stands in (test/workers/autopilot-fakes.ts), as in autopilot-webhook.test.ts.

import { exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import type { IssueFacts } from "../../src/autopilot/provider";
import { page, signIn } from "./dashboard-helpers";
import { call, createOrg, sleep } from "./helpers";
import { briefBody, createProject, installRealAutopilotWithTracker, sign, WEBHOOK_SECRET, type RealProject } from "./autopilot-fakes";

const fake = installRealAutopilotWithTracker();
const UNKNOWN_PROJECT = "apj_000000000000000000000000";
const person = { id: "u-alice", name: "Alice", email: "alice@example.com", url: "https://linear.app/acme/profiles/alice", type: "user" };

let org: { orgId: string; admin: string };
let linear: RealProject;
let github: RealProject;
let nextNumber = 1;

beforeAll(async () => {
  org = await createOrg("linear-door");
  linear = await createProject(org.admin, {
    name: "widgets from linear",
    repository: "acme/widgets",
    ready_label: undefined,
    tracker: { kind: "linear", workspace: "acme", team: "ENG", ready_label: "ready", review_state: "In Review", api_key: "lin_api_a_test_key_0123456789" },
  });
  github = await createProject((await createOrg("linear-door-github")).admin);
});

/** A ready issue ENG-`number` as the tracker reports it, its label added by a person. */
function readyIssue(number: number) {
  const facts: IssueFacts = { ref: { provider: "linear", repository: "acme/ENG", number }, title: `Issue ${number}`, body: briefBody(), state: "open", stateReason: null, labels: ["ready"], url: `https://linear.app/acme/issue/ENG-${number}/issue`, updatedAtMs: Date.now() };
  fake.tracker(linear.id).issues.set(number, { facts, blockers: [], transition: { eventId: `history-${number}`, atMs: Date.now(), actor: { login: person.email, type: "User", viaApp: null } } });
}

/** Linear's Issue update webhook for the ready label's addition to `identifier`, `ageMs` old. */
function labelled(identifier: string, { ageMs = 0, actor = person as Record<string, unknown> } = {}) {
  return {
    action: "update",
    type: "Issue",
    actor,
    createdAt: new Date().toISOString(),
    data: { id: crypto.randomUUID(), identifier, title: "An issue", labelIds: ["l-ready"], labels: [{ id: "l-ready", name: "ready", color: "#0e8a16" }], state: { id: "s1", name: "Todo", type: "unstarted" }, stateId: "s1" },
    updatedFrom: { labelIds: [], updatedAt: new Date(Date.now() - 1_000).toISOString() },
    url: `https://linear.app/acme/issue/${identifier}/an-issue`,
    organizationId: "org-acme",
    webhookId: "wh-1",
    webhookTimestamp: Date.now() - ageMs,
  };
}

/** Posts `body` as Linear does; the raw answer, so two answers can be compared byte for byte. */
async function deliver(projectId: string, body: string, { secret = WEBHOOK_SECRET as string | null, deliveryId = crypto.randomUUID() } = {}) {
  const headers: Record<string, string> = { "Content-Type": "application/json; charset=utf-8", "Linear-Delivery": deliveryId, "Linear-Event": "Issue" };
  if (secret !== null) headers["Linear-Signature"] = (await sign(secret, body)).slice("sha256=".length);
  const res = await exports.default.fetch(new Request(`http://docket.test/v1/autopilot/projects/${projectId}/linear/webhook`, { method: "POST", headers, body }));
  return { status: res.status, text: await res.text() };
}

async function ticketOf(number: number) {
  const res = await call("GET", `/v1/autopilot/projects/${linear.id}/tickets`, { token: org.admin });
  expect(res.status).toBe(200);
  return (res.body.tickets as Record<string, any>[]).find((t) => t.number === number);
}

async function decided(number: number) {
  let ticket;
  for (let i = 0; i < 100 && (!ticket?.status || ticket.status === "admitting"); i++) {
    await sleep(50);
    ticket = await ticketOf(number);
  }
  return ticket;
}

const runsOfOrg = async () => (await call("GET", "/v1/runs?limit=200", { token: org.admin })).body.runs as { id: string }[];

describe("the Linear door refuses what Linear did not sign, now", () => {
  it("a Linear project's answer names its Linear door as the URL Linear's webhook is to be sent to", async () => {
    const answer = await call("GET", `/v1/autopilot/projects/${linear.id}`, { token: org.admin });
    expect(answer.body.webhook.url).toMatch(new RegExp(`/v1/autopilot/projects/${linear.id}/linear/webhook$`));
  });

  it("a wrong or missing signature, a stale webhookTimestamp, an unknown project and a GitHub project get the same 401, and nothing is admitted", async () => {
    const number = nextNumber++;
    readyIssue(number);
    const fresh = JSON.stringify(labelled(`ENG-${number}`));
    const refusals = [
      await deliver(linear.id, fresh, { secret: "not-the-linear-signing-secret" }),
      await deliver(linear.id, fresh, { secret: null }),
      await deliver(linear.id, JSON.stringify(labelled(`ENG-${number}`, { ageMs: 90_000 }))),
      await deliver(UNKNOWN_PROJECT, fresh),
      await deliver(github.id, fresh),
    ];
    expect(refusals[0].status).toBe(401);
    expect(JSON.parse(refusals[0].text).error.code).toBe("unauthorized");
    for (const other of refusals.slice(1)) expect(other).toEqual(refusals[0]);
    await sleep(1_000);
    expect(await ticketOf(number)).toBeUndefined();
    expect(await runsOfOrg()).toEqual([]);
  });
});

describe("a signed Linear delivery is admitted as a GitHub one is", () => {
  it("a person's ready label on an issue of the team admits one run, and the same Linear-Delivery again admits nothing more", async () => {
    const number = nextNumber++;
    readyIssue(number);
    const body = JSON.stringify(labelled(`ENG-${number}`));
    const deliveryId = crypto.randomUUID();
    const first = await deliver(linear.id, body, { deliveryId });
    expect(first.status).toBe(202);
    expect(JSON.parse(first.text)).toEqual({ delivery_id: deliveryId, event: "Issue", queued: true, ignored_reason: null });
    const admitted = (await decided(number))!;
    expect(admitted).toMatchObject({ status: "admitted", reasons: [] });
    expect(admitted.ticket).toBe(`linear:acme/ENG-${number}`);

    expect((await deliver(linear.id, body, { deliveryId })).status).toBe(202);
    await sleep(1_000);
    expect((await runsOfOrg()).map((r) => r.id)).toEqual([admitted.run_id]);
    expect((await ticketOf(number))!.run_id).toBe(admitted.run_id);
  });

  it("an issue of another team and a type admission does not subscribe to are acknowledged and ignored", async () => {
    const otherTeam = await deliver(linear.id, JSON.stringify(labelled("OPS-7")));
    expect(otherTeam.status).toBe(202);
    expect(JSON.parse(otherTeam.text)).toMatchObject({ queued: false, ignored_reason: expect.stringContaining("OPS-7") });
    const project = await deliver(linear.id, JSON.stringify({ ...labelled("ENG-1"), type: "Project" }));
    expect(project.status).toBe(202);
    expect(JSON.parse(project.text)).toMatchObject({ event: "Project", queued: false });
  });
});

describe("the console shows a Linear project as it shows a GitHub one", () => {
  it("the project names its Linear team, and its admitted ticket reads ENG-n, linking to the issue in Linear", async () => {
    const number = nextNumber++;
    readyIssue(number);
    expect((await deliver(linear.id, JSON.stringify(labelled(`ENG-${number}`)))).status).toBe(202);
    expect(await decided(number)).toMatchObject({ status: "admitted" });
    const session = await signIn(org.admin);
    const list = await page("/dash/autopilot", { cookie: session });
    expect(list.text).toContain("Linear team ENG of acme");
    const project = await page(`/dash/autopilot/${linear.id}`, { cookie: session });
    expect(project.text).toContain(`>ENG-${number}</a>`);
    expect(project.text).toContain(`href="https://linear.app/acme/issue/ENG-${number}"`);
    expect(project.text).toContain("pull requests go to acme/widgets");
    const ticket = await page(`/dash/autopilot/${linear.id}/tickets/${number}`, { cookie: session });
    expect(ticket.text).toContain(`<h1>Issue ENG-${number}</h1>`);
    expect(ticket.text).toContain(`<a id="tracker-issue" href="https://linear.app/acme/issue/ENG-${number}" rel="noreferrer">ENG-${number} in Linear</a>`);
    const detail = await call("GET", `/v1/autopilot/projects/${linear.id}/tickets/${number}`, { token: org.admin });
    expect(detail.body.issue_url).toBe(`https://linear.app/acme/issue/ENG-${number}`);
  });
});
