// Tickets belong to one project (../shared/DESIGN.md, "Each ticket is a Durable Object too"): a
// TicketObject is named by the autopilot project and the issue's key with the repository
// lower-cased, so two organizations watching one repository never share a ticket, its generation or
// its history, and a project's "Owner/Repo" and "owner/repo" are one ticket. Tickets kept under the
// old name (the bare key, one per repository issue) are taken over by their project on first use.
// Admission is driven as in autopilot-admission.test.ts: production projects, rules and objects,
// with only GitHub stood in for by an in-memory tracker (autopilot-fakes.ts).

import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { runFor } from "../../src/autopilot/admission";
import { handleDelivery, type AutopilotMessage } from "../../src/autopilot/queue";
import { loadConfig } from "../../src/config";
import { dispatchRun } from "../../src/run/dispatch";
import { call, claim, createOrg, registerRunner } from "./helpers";
import { briefBody, createProject, example, installRealAutopilotWithTracker, type FakeIssue, type RealProject } from "./autopilot-fakes";

const config = loadConfig(env as unknown as Record<string, unknown>);
const fake = installRealAutopilotWithTracker();
let nextNumber = 900;

/** A person labels issue `number` of the project's repository ready: the project's tracker records it. */
function labelReady(project: RealProject, number: number, repository = project.repository) {
  const payload = example("issues", "labeled");
  payload.issue.number = number;
  payload.issue.body = briefBody(payload.issue.body);
  payload.repository.full_name = repository;
  return fake.tracker(project.id).fromPayload(payload);
}

function delivery(project: RealProject, number: number, action = "labeled"): AutopilotMessage {
  const sender = action === "labeled" ? { login: "Codertocat", type: "User", viaApp: null } : null;
  return { kind: "autopilot.delivery", project_id: project.id, number, delivery_id: crypto.randomUUID(), event: "issues", action, sender };
}

async function ticketShown(admin: string, project: RealProject, number: number) {
  return call("GET", `/v1/autopilot/projects/${project.id}/tickets/${number}`, { token: admin });
}

/** The organization's runs whose metadata names issue `number` (any spelling of the repository). */
async function runsOfIssue(admin: string, number: number) {
  const list = await call("GET", "/v1/runs?limit=200", { token: admin });
  const found: string[] = [];
  for (const row of list.body.runs) {
    const run = await call("GET", `/v1/runs/${row.id}`, { token: admin });
    if (String(run.body.metadata?.autopilot_ticket ?? "").toLowerCase().endsWith(`#${number}`)) found.push(run.body.id);
  }
  return found;
}

/** Two organizations whose projects watch one repository, and one label event on an issue that both installations see: the same readiness generation. */
async function twoOrganizationsOnOneIssue(name: string) {
  const a = await createOrg(`${name}-a`);
  const b = await createOrg(`${name}-b`);
  const projectA = await createProject(a.admin);
  const projectB = await createProject(b.admin);
  const number = nextNumber++;
  const generation = labelReady(projectA, number).transition!.eventId;
  labelReady(projectB, number).transition!.eventId = generation;
  return { a, b, projectA, projectB, number, generation };
}

/** The run admission would create for the issue, dispatched directly (with `key` as its idempotency key, or none). */
async function runOfIssue(project: RealProject, issue: FakeIssue, key: string | null) {
  const { rules } = fake.deps;
  const eligibility = rules.checkEligibility(project, issue.facts, [], rules.parseAgentBrief(issue.facts.body, project.briefHeading));
  const ticketKey = `github:${project.repository}#${issue.facts.ref.number}`;
  return (await dispatchRun(env, project.orgId, runFor(project, issue.facts, eligibility, config), key, { ticketKey, projectId: project.id })).run;
}

describe("tickets belong to one project", () => {
  it("two organizations watching one repository each admit their own run and see only their own ticket's history", async () => {
    const { a, b, projectA, projectB, number } = await twoOrganizationsOnOneIssue("tickets");
    const admittedA = await handleDelivery(env, config, fake.deps, delivery(projectA, number));
    const admittedB = await handleDelivery(env, config, fake.deps, delivery(projectB, number));
    expect(admittedA).toMatchObject({ outcome: "admitted" });
    expect(admittedB).toMatchObject({ outcome: "admitted" });
    expect(admittedB!.runId).not.toBe(admittedA!.runId);
    const shownA = await ticketShown(a.admin, projectA, number);
    const shownB = await ticketShown(b.admin, projectB, number);
    expect(shownA.body).toMatchObject({ status: "admitted", run_id: admittedA!.runId });
    expect(shownB.body).toMatchObject({ status: "admitted", run_id: admittedB!.runId });
    expect(shownA.body.history.map((h: Record<string, unknown>) => h.run_id)).toEqual([admittedA!.runId]);
    expect(shownB.body.history.map((h: Record<string, unknown>) => h.run_id)).toEqual([admittedB!.runId]);
    // A's run ending frees A's ticket only: B still holds its run, and A's ticket reads done.
    expect((await call("POST", `/v1/runs/${admittedA!.runId}/cancel`, { token: a.admin, body: {} })).status).toBe(200);
    expect(await handleDelivery(env, config, fake.deps, delivery(projectA, number, "edited"))).toMatchObject({ outcome: "unchanged" });
    expect((await ticketShown(a.admin, projectA, number)).body).toMatchObject({ status: "done", run_id: null });
    expect((await ticketShown(b.admin, projectB, number)).body).toMatchObject({ status: "admitted", run_id: admittedB!.runId });
    expect(JSON.stringify((await ticketShown(b.admin, projectB, number)).body)).not.toContain(admittedA!.runId);
  });

  it('"Owner/Repo" and "owner/repo" are one ticket: a project that changes its repository\'s case keeps its ticket and its one run', async () => {
    const org = await createOrg("tickets-case");
    const project = await createProject(org.admin, { repository: "Codertocat/Cased" });
    const number = nextNumber++;
    labelReady(project, number);
    const admitted = await handleDelivery(env, config, fake.deps, delivery(project, number));
    expect(admitted).toMatchObject({ outcome: "admitted" });
    const patched = await call("PATCH", `/v1/autopilot/projects/${project.id}`, { token: org.admin, body: { repository: "codertocat/cased" } });
    expect(patched.status).toBe(200);
    const renamed = { ...project, repository: "codertocat/cased" };
    // The same ready transition, seen again under the other spelling: nothing new.
    expect(await handleDelivery(env, config, fake.deps, delivery(renamed, number, "edited"))).toMatchObject({ outcome: "already_admitted", runId: admitted!.runId });
    const shown = await ticketShown(org.admin, renamed, number);
    expect(shown.status).toBe(200);
    expect(shown.body).toMatchObject({ status: "admitted", run_id: admitted!.runId });
    expect(await runsOfIssue(org.admin, number)).toEqual([admitted!.runId]);
  });
});

describe("a ticket kept per repository before tickets were per project", () => {
  /** The old object (named by the bare key) as it was left: `row` for the project, one history entry, and the project's index row. */
  async function keptTheOldWay(project: RealProject, number: number, row: { status: string; generation: string; admitted: string | null; pending: string | null; runId: string | null }) {
    const key = `github:${project.repository}#${number}`;
    const old = env.TICKET.get(env.TICKET.idFromName(key));
    await runInDurableObject(old, (_o, state) => {
      state.storage.sql.exec(
        `INSERT INTO ticket (id, ticket_key, project_id, org_id, number, status, reasons, generation, admitted_generation, pending_generation, run_id, updated_at_ms)
         VALUES (1, ?, ?, ?, ?, ?, '[]', ?, ?, ?, ?, ?)`,
        key, project.id, project.orgId, number, row.status, row.generation, row.admitted, row.pending, row.runId, Date.now(),
      );
      state.storage.sql.exec("INSERT INTO history (entry) VALUES (?)", JSON.stringify({ kind: "admitted", run_id: "run_kept_behind", reasons: [] }));
    });
    await env.DB.prepare(
      "INSERT INTO autopilot_tickets (project_id, ticket_key, org_id, number, status, reasons, generation, run_id, updated_at_ms) VALUES (?, ?, ?, ?, ?, '[]', ?, ?, ?)",
    )
      .bind(project.id, key, project.orgId, number, row.status, row.generation, row.runId, Date.now())
      .run();
    return key;
  }

  it("its queued run is still its run: handed out at a claim, never admitted twice; its old history stays behind", async () => {
    const org = await createOrg("tickets-kept");
    const project = await createProject(org.admin);
    const runner = await registerRunner(org.admin);
    const number = nextNumber++;
    const issue = labelReady(project, number);
    const run = await runOfIssue(project, issue, null);
    const generation = issue.transition!.eventId;
    await keptTheOldWay(project, number, { status: "admitted", generation, admitted: generation, pending: null, runId: run.id });
    // The claim asks the ticket first (the per-project one), which takes over the old row and backs the run.
    expect((await claim(runner.token)).body.run_id).toBe(run.id);
    expect(await handleDelivery(env, config, fake.deps, delivery(project, number, "edited"))).toMatchObject({ outcome: "already_admitted", runId: run.id });
    const shown = await ticketShown(org.admin, project, number);
    expect(shown.body).toMatchObject({ status: "admitted", run_id: run.id, admitted_generation: generation });
    expect(JSON.stringify(shown.body.history)).not.toContain("run_kept_behind");
    expect(await runsOfIssue(org.admin, number)).toEqual([run.id]);
  });

  it("its admission interrupted before it recorded its run is finished with the run its idempotency key names", async () => {
    const org = await createOrg("tickets-kept-pending");
    const project = await createProject(org.admin);
    const number = nextNumber++;
    const issue = labelReady(project, number);
    const generation = issue.transition!.eventId;
    const run = await runOfIssue(project, issue, `autopilot:github:${project.repository}#${number}:${generation}`);
    await keptTheOldWay(project, number, { status: "idle", generation, admitted: null, pending: generation, runId: null });
    expect(await handleDelivery(env, config, fake.deps, delivery(project, number, "edited"))).toMatchObject({ outcome: "already_admitted", runId: run.id });
    expect(await runsOfIssue(org.admin, number)).toEqual([run.id]);
  });

  it("another project's row there is not taken: that project's ticket starts afresh", async () => {
    const { b: other, projectA: ownerProject, projectB: otherProject, number, generation } = await twoOrganizationsOnOneIssue("tickets-kept");
    const key = await keptTheOldWay(ownerProject, number, { status: "done", generation, admitted: generation, pending: null, runId: null });
    await env.DB.prepare("INSERT INTO autopilot_tickets (project_id, ticket_key, org_id, number, status, reasons, generation, run_id, updated_at_ms) VALUES (?, ?, ?, ?, 'done', '[]', NULL, NULL, 0)")
      .bind(otherProject.id, key, otherProject.orgId, number)
      .run();
    const admitted = await handleDelivery(env, config, fake.deps, delivery(otherProject, number));
    expect(admitted).toMatchObject({ outcome: "admitted" });
    const shown = await ticketShown(other.admin, otherProject, number);
    expect(shown.body.history.map((h: Record<string, unknown>) => h.run_id)).toEqual([admitted!.runId]);
  });
});
